"""Request and response shapes of /batches.

The Python client (ocrq) imports these: only pydantic and the stdlib may be imported here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from common.jobs.schemas import Output
from common.queue.names import Priority

BatchStatus = Literal["listing", "running", "completed", "failed", "canceled"]
Pattern = Annotated[str, Field(min_length=1, max_length=256)]
S3_PREFIX = r"^s3://[^/?#]+(/[^?#]*)?$"


class BatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_prefix: str = Field(max_length=1024, pattern=S3_PREFIX, examples=["s3://scans/2026/"])
    output_prefix: str = Field(max_length=1024, pattern=S3_PREFIX, examples=["s3://ocr-results/2026/"])
    include: list[Pattern] | None = Field(default=None, max_length=64, examples=[["*.pdf", "invoices/*"]],
                                          description="shell-style patterns on the key relative to input_prefix")
    exclude: list[Pattern] | None = Field(default=None, max_length=64, examples=[["drafts/*"]])
    output: Output = "markdown"
    output_formats: list[Output] = Field(default_factory=list, max_length=9, examples=[["alto", "hocr"]],
                                         description="more formats written beside `output`, each under the same "
                                                     "key with its own extension")
    priority: Priority = "bulk"
    webhook_url: str | None = Field(default=None, max_length=2048)
    metadata: dict[str, Any] | None = None
    source_profile: str | None = Field(default=None, max_length=64,
                                       description="a named S3 profile from the service's settings")
    retry_failed: bool = Field(default=False, description="redo objects whose earlier result is a failure")


class BatchLinks(BaseModel):
    self: str
    manifest: str | None = None


class BatchAccepted(BaseModel):
    id: str
    status: BatchStatus
    links: BatchLinks


class BatchPages(BaseModel):
    total: int
    done: int
    failed: int


class BatchRates(BaseModel):
    objects_per_s: float
    pages_per_s: float


class BatchView(BaseModel):
    id: str
    status: BatchStatus
    input_prefix: str
    output_prefix: str
    include: list[str] | None
    exclude: list[str] | None
    output: Output
    output_formats: list[Output]
    priority: Priority
    source_profile: str | None
    metadata: dict[str, Any] | None
    listed: int = Field(description="objects listed so far, whatever became of them")
    queued: int
    running: int
    succeeded: int
    failed: int
    canceled: int
    skipped: int = Field(description="not documents, excluded by a pattern, empty or too large")
    skipped_existing: int = Field(description="already read with the same ETag and options")
    listing_done: bool
    pages: BatchPages
    rates: BatchRates
    eta_s: float | None = Field(description="seconds until the objects listed so far are read, at the rate so far")
    error: str | None
    manifest: str | None
    created_at: datetime
    listed_at: datetime | None
    finished_at: datetime | None
    erased_at: datetime | None = Field(default=None, description="when the tenant erased the batch and its jobs")
    links: BatchLinks


class BatchList(BaseModel):
    batches: list[BatchView]
    next: str | None = Field(description="the cursor of the next page; null on the last")
