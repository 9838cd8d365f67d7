"""Reading a multipart job submission into a temporary file and validated options."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from common.errors import Rejected
from common.jobs.schemas import JobOptions
from common.jobs.service import Source

OPTION_FIELDS = set(JobOptions.model_fields)


async def read_multipart(request: Request, *, max_bytes: int) -> tuple[Source, JobOptions]:
    """The uploaded file (copied to a temp file the caller must delete) and the form's options.

    The body limit in front of this leaves room for the multipart framing; `max_bytes` holds the file itself.
    """
    try:
        form = await request.form(max_files=1, max_fields=len(OPTION_FIELDS) + 1)
    except Exception as exc:  # starlette raises several types for malformed multipart bodies
        if exc.__class__.__name__ == "BodyTooLarge":
            raise
        raise Rejected(400, f"malformed multipart body: {exc}", code="bad_multipart") from exc
    unknown = set(form.keys()) - OPTION_FIELDS - {"file"}
    if unknown:
        raise Rejected(422, f"unknown fields: {', '.join(sorted(unknown))}", code="unknown_field")
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise Rejected(422, "a multipart 'file' part is required", code="missing_file")
    raw = {k: v for k, v in form.items() if k != "file" and isinstance(v, str) and v != ""}
    if "metadata" in raw:
        try:
            raw["metadata"] = json.loads(raw["metadata"])
        except json.JSONDecodeError as exc:
            raise Rejected(422, f"metadata must be a JSON object: {exc}", code="invalid_metadata") from exc
        if not isinstance(raw["metadata"], dict):
            raise Rejected(422, "metadata must be a JSON object", code="invalid_metadata")
    try:
        options = JobOptions.model_validate(raw)
    except ValidationError as exc:
        raise Rejected(422, validation_message(exc), code="invalid_options") from exc
    try:
        source = save_upload(upload, max_bytes=max_bytes)
    finally:
        await form.close()
    return source, options


class _Spool:
    """Bytes copied to a temp file (the caller deletes it), hashed on the way, refused past `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.size, self.digest = max_bytes, 0, hashlib.sha256()
        self.file = tempfile.NamedTemporaryFile(prefix="ocrq-upload-", delete=False)  # noqa: SIM115 (closed by source)

    def add(self, chunk: bytes) -> bool:
        """Whether the chunk was kept: False once the limit is passed."""
        self.size += len(chunk)
        if self.size > self.max_bytes:
            return False
        self.digest.update(chunk)
        self.file.write(chunk)
        return True

    def source(self, filename: str | None) -> Source:
        self.file.close()
        if self.size > self.max_bytes:
            Path(self.file.name).unlink(missing_ok=True)
            raise Rejected(413, f"the file is larger than the {self.max_bytes}-byte limit", code="too_large")
        return Source(kind="upload", uri=filename or "upload", filename=filename, path=Path(self.file.name),
                      sha256=self.digest.hexdigest())


def save_upload(upload: UploadFile, *, max_bytes: int) -> Source:
    """The part's bytes spooled to a temp file (the caller deletes it); 413 past `max_bytes`."""
    spool = _Spool(max_bytes)
    while (chunk := upload.file.read(1024 * 1024)) and spool.add(chunk):
        pass
    return spool.source(upload.filename)


def validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


async def save_body(request: Request, *, filename: str | None, max_bytes: int) -> Source:
    """The request's whole body (a file sent as it is) spooled to a temp file the caller deletes; 413 past the limit."""
    spool = _Spool(max_bytes)
    async for chunk in request.stream():
        if not spool.add(chunk):
            break
    return spool.source(filename)
