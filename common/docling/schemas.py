"""docling-serve's request and response shapes, as far as ocrq answers them (pydantic and the stdlib only)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# docling's ConversionStatus; ocrq's job states map onto it (common.docling.service.TASK_STATUS).
ConversionStatus = Literal["pending", "started", "failure", "success", "partial_success", "skipped"]
# docling's OutputFormat values that ocrq can fill; the others answer 422 (common.docling.options).
ToFormat = Literal["md", "json", "text"]


class ExportDocumentResponse(BaseModel):
    filename: str
    md_content: str | None = None
    json_content: dict[str, Any] | None = Field(default=None, description="a DoclingDocument (docling-core)")
    html_content: str | None = None
    text_content: str | None = None
    doctags_content: str | None = None


class ErrorItem(BaseModel):
    component_type: Literal["document_backend", "model", "doc_assembler", "user_input", "pipeline"] = "model"
    module_name: str = "ocrq"
    error_message: str
    category: str = "inference_failure"
    page_no: int | None = None


class ProfilingItem(BaseModel):
    scope: Literal["page", "document"]
    count: int = 0
    times: list[float] = []
    start_timestamps: list[datetime] = []


class ConvertDocumentResponse(BaseModel):
    """One document's result: what the sync routes and `GET /v1/result/{task_id}` answer."""

    document: ExportDocumentResponse
    status: ConversionStatus
    errors: list[ErrorItem] = []
    processing_time: float
    timings: dict[str, ProfilingItem] = {}


class TaskProcessingMeta(BaseModel):
    num_docs: int
    num_processed: int = 0
    num_succeeded: int = 0
    num_partially_succeeded: int = 0
    num_failed: int = 0


class TaskStatusResponse(BaseModel):
    task_id: str
    task_type: Literal["convert"] = "convert"
    task_status: ConversionStatus
    task_position: int | None = None
    task_meta: TaskProcessingMeta | None = None
    error_message: str | None = None


class HttpSourceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["http"] = "http"
    url: str = Field(min_length=1, max_length=4096)
    headers: dict[str, Any] = {}


class FileSourceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["file"] = "file"
    base64_string: str
    filename: str = Field(min_length=1, max_length=1024)


class TargetRequest(BaseModel):
    """docling's target; only `inbody` (the result in the answer) is offered here."""

    model_config = ConfigDict(extra="allow")

    kind: str = "inbody"


class ConvertSourcesRequest(BaseModel):
    """`POST /v1/convert/source[/async]`'s body; `options` is checked by common.docling.options."""

    model_config = ConfigDict(extra="forbid")

    options: dict[str, Any] = {}
    sources: list[Annotated[HttpSourceRequest | FileSourceRequest, Field(discriminator="kind")]] = Field(min_length=1)
    target: TargetRequest = TargetRequest()
    callbacks: list[Any] = []


class WebsocketMessage(BaseModel):
    """A frame of `/v1/status/ws/{task_id}`: the task's status on connecting and at each update, or an error."""

    message: Literal["connection", "update", "error"]
    task: TaskStatusResponse | None = None
    error: str | None = None
