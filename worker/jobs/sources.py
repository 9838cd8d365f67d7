"""Where a worker finds a job's document on local disk, fetching it once per worker."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from botocore.client import BaseClient

from common.files import atomic_path
from common.jobs.models import Job
from common.storage import Storage, download_object
from common.tenancy.s3_grants import S3Location

MAX_AGE_S = 3600


class SourceCache:
    """Local copies of sources, one per job, dropped after an hour unused."""

    def __init__(self, *, root: Path, storage: Storage, s3_for: Callable[[Job], BaseClient]) -> None:
        self.root, self.storage = root, storage
        self.s3_for = s3_for  # the client of the grant that lets the job's tenant read its s3_uri
        root.mkdir(parents=True, exist_ok=True)

    def path(self, job: Job) -> Path:
        """A local path holding the job's document."""
        if job.source_key and (local := self.storage.local_path(job.source_key)):
            return local
        dest = self.root / job.id
        if dest.exists():
            os.utime(dest)
            return dest
        self._evict_old()
        with atomic_path(dest) as tmp:
            if job.source_key:
                self.storage.download(job.source_key, tmp)
            elif job.source_kind == "s3":
                location = S3Location.parse(job.source_uri)
                download_object(self.s3_for(job), location.bucket, location.key, tmp)
            else:
                raise FileNotFoundError(f"job {job.id} has no stored source")
        return dest

    def drop(self, job_id: str) -> None:
        (self.root / job_id).unlink(missing_ok=True)

    def _evict_old(self) -> None:
        cutoff = time.time() - MAX_AGE_S
        for entry in self.root.iterdir():
            try:
                if entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            except FileNotFoundError:
                pass
