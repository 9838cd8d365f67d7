"""One uploaded file in, one LangChain-shaped document a page out: Open WebUI's external loader contract."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from common.errors import Rejected
from common.jobs import service as jobs
from common.jobs.models import Job
from common.jobs.schemas import JobOptions
from common.jobs.service import Source
from common.services import Services

# Open WebUI's loader (main branch) falls back to its own parsing on a 422 whose detail holds these words.
NO_TEXT = "No extractable text"


def filename_of(header: str | None) -> str | None:
    """The X-Filename header as Open WebUI sends it (urllib's quote of the file's base name), read back."""
    if not header:
        return None
    name = unquote(header).replace("\\", "/").rsplit("/", 1)[-1].strip()
    return name[:255] or None


def submit(svc: Services, *, tenant_id: str, source: Source) -> Job:
    """An interactive markdown job of the whole document, checked as any upload is."""
    options = JobOptions(output="markdown", priority="interactive", metadata={"via": "open-webui"})
    return jobs.submit(svc, tenant_id=tenant_id, source=source, options=options)


def documents(svc: Services, *, job: Job) -> list[dict[str, Any]]:
    """The ended job's pages as Open WebUI's documents: the page's markdown, and where it came from."""
    if job.status != "succeeded":
        reason = f": {job.error}" if job.error else ""
        raise Rejected(422, f"{NO_TEXT}: the job {job.id} {job.status}{reason}", code="no_text")
    with svc.db.session() as session:
        pages = [p for p in jobs.pages_of(session, job_id=job.id) if p.status == "succeeded"]
    found = [p for p in pages if (p.text or "").strip()]
    if not found:
        raise Rejected(422, f"{NO_TEXT} in the document", code="no_text")
    name = job.filename or job.id
    return [{"page_content": page.text.strip(),
             "metadata": {"source": name, "page": page.index, "page_label": str(page.index + 1),
                          "total_pages": job.pages_total, "ocrq_job_id": job.id,
                          "ocrq_page_source": page.source, "confidence": page.confidence}}
            for page in found]
