"""A job's searchable PDF for the API: the stored one of a job that asked for it, else built on demand."""

from __future__ import annotations

import tempfile
from pathlib import Path

from botocore.exceptions import ClientError
from sqlalchemy.orm import Session

from common import outages
from common.documents import DocumentRejected
from common.errors import Rejected
from common.jobs import results
from common.jobs.models import Job
from common.jobs.service import pages_of
from common.pdf_output import job_pdf
from common.services import Services
from common.storage import ObjectMissing, download_object
from common.tenancy.s3_grants import NotGranted, S3Location


def stored_key(job: Job) -> str | None:
    """Where the worker put the job's PDF: only jobs submitted with output=pdf have one."""
    return results.object_key(job.result_key, "pdf") if job.result_key and job.output == "pdf" else None


def build_on_demand(svc: Services, session: Session, *, job: Job) -> bytes:
    """The PDF of a job that asked for another format, built now from its source and its pages."""
    with tempfile.TemporaryDirectory(prefix="ocrq-pdf-") as tmp:
        source = Path(tmp) / "source"
        try:
            _download_source(svc, job, source)
        except (ObjectMissing, ClientError, NotGranted, OSError) as exc:
            if outages.outage_of(exc):  # the store is busy, the source may well be there: 503, not gone
                raise
            raise Rejected(409, "the PDF cannot be built: the source document is no longer stored; "
                                "submit it again with output=pdf", code="source_gone") from exc
        try:
            return job_pdf(job, pages_of(session, job_id=job.id), source=source, limits=svc.limits)
        except DocumentRejected as exc:
            raise Rejected(422, f"the PDF cannot be built: {exc}", code="pdf_failed") from exc


def _download_source(svc: Services, job: Job, dest: Path) -> None:
    if job.source_expired_at:
        raise ObjectMissing(job.source_key or job.source_uri)
    if job.source_key:
        svc.storage.download(job.source_key, dest)
        return
    if job.source_kind != "s3":
        raise ObjectMissing(job.source_uri)
    location = S3Location.parse(job.source_uri)
    client = svc.s3_clients.granted(tenant_id=job.tenant_id, access=[("read", location)], profile=job.source_profile)
    download_object(client, location.bucket, location.key, dest)
