"""Request and response shapes of the HTTP API.

The Python client (ocrq) imports these: only pydantic and the stdlib may be imported here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from common.queue.names import Priority

Output = Literal["markdown", "text", "json", "pdf", "hocr", "alto", "page", "csv", "xlsx"]
# What GET /jobs/{id}/result gives (docs/api/formats.md); a job's `output` is its default.
ResultFormat = Output
JobStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
# auto: a PDF page is read from its own text where that can be trusted, else OCR'd; always: every page OCR'd;
# never: text layers only, a page without a trusted one fails (docs/api/jobs.md: Born-digital PDFs).
OcrMode = Literal["auto", "always", "never"]
PageSource = Literal["text_layer", "ocr", "mixed"]


class JobOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pages: str | None = Field(default=None, max_length=256, examples=["1-3,7"])
    output: Output = "markdown"
    ocr: OcrMode = "auto"
    webhook_url: str | None = Field(default=None, max_length=2048)
    priority: Priority = "bulk"
    metadata: dict[str, Any] | None = None


class JobFromSource(JobOptions):
    """A job whose document is fetched by the service: exactly one of source_url or s3_uri."""

    source_url: str | None = Field(default=None, min_length=1, max_length=4096)
    # The bucket as botocore accepts it; S3's stricter rules are checked with the grants (common.tenancy.s3_grants).
    s3_uri: str | None = Field(default=None, max_length=2048, pattern=r"^s3://[a-zA-Z0-9.\-_]{1,255}/.+")
    source_profile: str | None = Field(default=None, max_length=64,
                                       description="the S3 grant to read s3_uri with; default: the first that allows it")

    @model_validator(mode="after")
    def _one_source(self) -> JobFromSource:
        if (self.source_url is None) == (self.s3_uri is None):
            raise ValueError("give exactly one of source_url or s3_uri")
        return self


class JobLinks(BaseModel):
    self: str
    result: str
    download: str | None = None


class PageError(BaseModel):
    page: int
    error: str


class JobSummary(BaseModel):
    """A job as `GET /jobs` lists it: what `GET /jobs/{id}` shows but the per-page errors."""

    id: str
    status: JobStatus
    source: Literal["upload", "url", "s3"]
    filename: str | None
    output: Output
    ocr: OcrMode = "auto"
    priority: Priority
    batch_id: str | None = None
    pages_total: int
    pages_done: int
    pages_failed: int
    error: str | None
    metadata: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    expired_at: datetime | None = Field(default=None, description="when retention deleted the result")
    erased_at: datetime | None = Field(default=None, description="when the tenant erased the job; a tombstone since")
    links: JobLinks


class JobView(JobSummary):
    page_errors: list[PageError]
    low_confidence_pages: list[int] = Field(
        default_factory=list, description="pages (1-based) read with a confidence under the tenant's threshold")
    confidence_threshold: float | None = Field(default=None, description="that threshold (0-1)")


class JobList(BaseModel):
    jobs: list[JobSummary]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class PageText(BaseModel):
    """A page done or failed, its text in the asked format; `json` adds the page's size, rotation and blocks."""

    page: int
    status: Literal["succeeded", "failed"]
    text: str | None
    error: str | None
    source: PageSource | None = Field(default=None, description="text_layer: the PDF's own text; ocr: read by OCR; "
                                                                 "mixed: its own text and its pictures' OCR'd")
    width: int | None = None
    height: int | None = None
    rotation: int | None = None
    blocks: list[dict[str, Any]] | None = None


class PageList(BaseModel):
    job_id: str
    status: JobStatus
    pages_total: int
    pages: list[PageText]
    next_after: int | None = Field(description="give it as `after` for what follows (a page still running below a "
                                               "finished one comes again); null once the job ended and all is shown")


class JobAccepted(BaseModel):
    id: str
    status: JobStatus
    links: JobLinks
