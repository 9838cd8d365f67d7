"""The work itself: split a job into pages, read each page, and close the job once."""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select, update

from common import outages, tracing
from common.documents import DocumentRejected, PageRangeError, RenderedPage, inspect, parse_page_ranges, render_page
from common.documents import office
from common.documents.kinds import sniff_file
from common.documents.office import OFFICE_KINDS, reads_as_pdf
from common.documents.text_layer import TextLayer, read_text_layer, read_text_layers
from common.events import service as events
from common.formats.structure import estimated, page_confidence
from common.jobs import states as job_states
from common.jobs.models import Job, Page, page_rows
from common.jobs.service import clamps_pages
from common.log_format import bind_job
from common.netguard import FetchError
from common.object_keys import source_key
from common.orm import utcnow
from common.queue import buckets
from common.queue import publish as dispatch
from common.sql import insert_ignoring_conflicts
from common.storage import ObjectMissing
from common.tenancy.s3_grants import NotGranted
from worker.context import WorkerContext
from worker.engines import pictures, text_layer
from worker.engines.base import EngineError, PageText
from worker.engines.time_limit import time_limit_in
from worker.jobs import routing, tenant_cap
from worker.jobs.ending import close_in, fail_job, finish_closing
from worker.jobs.reasons import internal_error, public_reason

log = logging.getLogger("ocrq.pipeline")


def prepare_job(ctx: WorkerContext, *, job_id: str) -> None:
    """Split the job into page rows (an upload was split at submit), then publish its queued pages."""
    bind_job(job_id=job_id)
    with ctx.db.session() as session:
        job = session.get(Job, job_id)
        if job is None or job.status not in job_states.JOB_ACTIVE:
            return
        tracing.annotate(job=job_id, tenant=job.tenant_id, lane=job.priority)
        job_states.start_job(session, job_id=job_id)
    if not job.pages_total and not _split(ctx, job):
        return
    with ctx.db.session() as session:
        job = session.get(Job, job_id)
        queued = session.execute(select(Page.id, Page.width, Page.height, Page.index)
                                 .where(Page.job_id == job_id, Page.status == "queued")).all()
    queued = _read_own_texts(ctx, job, queued)
    if not queued:
        return
    with ctx.db.session() as session:
        job_states.mark_enqueued(session, page_ids=[row.id for row in queued])
    routing.route_pages(ctx, sizes={row.id: (row.width, row.height) for row in queued}, lane=job.priority)
    log.info("job split into pages", extra={"published": len(queued)})


# Pages whose text layers the split reads (about 30 ms each here); a longer document's further pages are judged by
# their own page tasks, so the split stays well inside its task's time limit.
SPLIT_TEXT_PAGES = 400


def _read_own_texts(ctx: WorkerContext, job: Job, queued: list) -> list:
    """The job's PDF pages whose own text can be trusted, read together in one child and written at once; the
    pages left to OCR. A failure here leaves every page to the page tasks, which judge each page again."""
    if job is None or job.ocr == "always" or not reads_as_pdf(job.doc_kind) or not queued:
        return queued
    first = queued[:SPLIT_TEXT_PAGES]
    try:
        with tracing.span("text_layer", job=job.id, pages=len(first)):
            layers = read_text_layers(ctx.sources.path(job), [row.index for row in first], limits=ctx.limits)
    except (*outages.OUTAGE_TYPES, DocumentRejected, ObjectMissing, NotGranted, OSError) as exc:
        log.info("text layers not read at the split: %r", exc)
        return queued
    try:
        done = [(row, outcome) for row, layer in zip(first, layers, strict=True)
                if (outcome := _layer_outcome(job, row.index, layer)) is not None]
        if not done:
            return queued
        # One transaction for the pages read here, as _write_outcomes writes each: a page written once, its event,
        # and the job closed if nothing is left to OCR.
        with tracing.span("write", job=job.id, pages=len(done)), ctx.db.session() as session:
            written = []
            for row, outcome in done:
                if job_states.finish_page(session, page_id=row.id, outcome=outcome):
                    events.page_ended(session, job_id=job.id, page_id=row.id)
                    written.append(outcome)
            closed = close_in(session, ctx, job_id=job.id)
    except Exception as exc:
        _raise_unless_defect(exc)
        log.exception("text layers read at the split could not be used; the page tasks read each page")
        return queued
    for outcome in written:
        page_written(ctx, outcome)
    finish_closing(ctx, job_id=job.id, closed=closed)
    taken = {row.id for row, _ in done}
    return [row for row in queued if row.id not in taken]


def _split(ctx: WorkerContext, job: Job) -> bool:
    """Fetch and inspect a document the service has not seen yet, and create its page rows; False if it cannot."""
    try:
        if job.source_kind == "url" and not job.source_key:
            job.source_key = _fetch_url_source(ctx, job)
        path = ctx.sources.path(job)
        kind = sniff_file(path)
        if kind in OFFICE_KINDS:
            path = _converted(ctx, job, path, kind)
        try:
            info = inspect(path, limits=ctx.limits)
        except DocumentRejected as exc:
            if kind in OFFICE_KINDS and exc.code == "too_many_pages":
                raise office.too_many_pages(ctx.limits.max_pages) from None
            raise
        indices = parse_page_ranges(job.pages_spec, info.page_count, clamp=clamps_pages(job.meta))
    except outages.OUTAGE_TYPES as exc:
        if not (outages.outage_of(exc) and _within_outage_grace(ctx, job)):
            raise
        return _split_later(ctx, job, exc)
    except (DocumentRejected, PageRangeError, ObjectMissing, FetchError, NotGranted, OSError, ValueError) as exc:
        reason = public_reason(exc)
        log.warning("job rejected: %s (%r)", reason, exc)
        fail_job(ctx, job_id=job.id, reason=reason)
        return False
    with ctx.db.session() as session:
        insert_ignoring_conflicts(session, Page, page_rows(job.id, indices, info.page_sizes), keys=["job_id", "index"])
        session.execute(update(Job).where(Job.id == job.id).values(
            pages_total=len(indices), doc_kind=kind if kind in OFFICE_KINDS else job.doc_kind or info.kind,
            source_key=job.source_key))
    return True


def _converted(ctx: WorkerContext, job: Job, path: Path, kind: str) -> Path:
    """The office document as a PDF, stored in its place: the pages, the searchable PDF, retention and erase all
    read the job's source, which is now that PDF (a repeated split finds it a PDF already)."""
    with tempfile.TemporaryDirectory(prefix="ocrq-office-") as tmp, tracing.span("convert", job=job.id, kind=kind):
        pdf = office.convert_to_pdf(path, kind, Path(tmp), timeout_s=ctx.limits.render_timeout_s,
                                   max_pages=ctx.limits.max_pages)
        key = job.source_key or source_key(tenant_id=job.tenant_id, job_id=job.id)
        with pdf.open("rb") as body:
            ctx.storage.put(key, body)
    job.source_key = key
    ctx.sources.drop(job.id)
    return ctx.sources.path(job)


def _split_later(ctx: WorkerContext, job: Job, exc: BaseException) -> bool:
    """Storage unreachable: the job stays running without pages; try again later, as for an engine outage."""
    log.warning("storage unreachable; the job is split later: %s", exc.__class__.__name__)
    dispatch.publish_prepare(ctx.app, job_id=job.id, lane=job.priority, countdown=ctx.settings.engine_outage_retry_s)
    return False


def _fetch_url_source(ctx: WorkerContext, job: Job) -> str:
    from common.netguard import fetch

    s = ctx.settings
    fetched = fetch(job.source_uri, allowlist=s.net_allowlist, max_bytes=s.max_upload_bytes,
                    timeout_s=s.fetch_timeout_s, max_redirects=s.fetch_max_redirects)
    key = source_key(tenant_id=job.tenant_id, job_id=job.id)
    ctx.storage.put(key, fetched.content, content_type=fetched.content_type or "application/octet-stream")
    with ctx.db.session() as session:
        session.execute(update(Job).where(Job.id == job.id).values(source_key=key))
    return key


@dataclass(frozen=True)
class Claimed:
    page: Page
    job: Job
    attempts: int


def process_page(ctx: WorkerContext, *, page_id: str, delivery: str | None = None) -> None:
    """Render and read one page, write its result once, and close the job if it was the last. `delivery` is the
    message's task id (job_states.claimable)."""
    process_pages(ctx, page_ids=[page_id], deliveries={page_id: delivery} if delivery else None)


def process_pages(ctx: WorkerContext, *, page_ids: list[str], deliveries: dict[str, str] | None = None) -> None:
    """Claim, render and read pages together (a same-size batch on the GPU); write each result once."""
    deliveries = deliveries or {}
    claimed = [c for page_id in page_ids if (c := _claim(ctx, page_id=page_id, delivery=deliveries.get(page_id)))]
    max_attempts = ctx.settings.page_retries + 1
    outcomes: dict[str, job_states.PageOutcome] = {}
    ready: list[tuple[Claimed, RenderedPage]] = []
    mixed: list[tuple[Claimed, RenderedPage, TextLayer, list[pictures.Region]]] = []
    for c in claimed:
        bind_job(job_id=c.job.id, page=c.page.index + 1, page_id=c.page.id)
        tracing.annotate(job=c.job.id, page=c.page.index + 1, tenant=c.job.tenant_id, lane=c.job.priority,
                         attempt=c.attempts, bucket=_bucket(c.page))
        ctx.metrics.page_taken(lane=c.job.priority, enqueued_at=c.page.enqueued_at, started_at=c.page.started_at)
        if c.attempts > max_attempts:
            outcomes[c.page.id] = job_states.PageOutcome(
                error=f"gave up after {max_attempts} attempts: the worker died or ran out of time on this page")
            continue
        try:
            own = _own_text(ctx, c)
            if isinstance(own, job_states.PageOutcome):
                outcomes[c.page.id] = own
                continue
            with tracing.span("render", job=c.job.id, page=c.page.index + 1):
                rendered = render_page(ctx.sources.path(c.job), c.page.index, limits=ctx.limits)
            if own is None:
                ready.append((c, rendered))
            elif regions := pictures.regions(rendered.image, own):
                mixed.append((c, rendered, own, regions))
            else:
                outcomes[c.page.id] = _text_outcome(own)
        except outages.OUTAGE_TYPES as exc:
            if outages.outage_of(exc) and _within_outage_grace(ctx, c.job):
                _retry_later(ctx, c, refund=True)
                continue
            what = outages.outage_of(exc) or "storage"
            outcomes[c.page.id] = job_states.PageOutcome(
                error=f"page {c.page.index + 1} could not be read: the {what} stayed unreachable")
        except (DocumentRejected, ObjectMissing, NotGranted, OSError) as exc:
            log.warning("page %d not rendered: %r", c.page.index + 1, exc)
            outcomes[c.page.id] = job_states.PageOutcome(
                error=f"page {c.page.index + 1} could not be rendered: {public_reason(exc)}")
        except Exception as exc:
            _raise_unless_defect(exc)
            _defect(ctx, [c], outcomes, max_attempts, "its text layer was read or it was rendered")
    if ready or mixed:
        _read_with_engine(ctx, ready, mixed, outcomes, max_attempts)
    _write_outcomes(ctx, [(c.page, outcomes[c.page.id]) for c in claimed if c.page.id in outcomes])


def _read_with_engine(ctx: WorkerContext, ready: list[tuple[Claimed, RenderedPage]],
                      mixed: list[tuple[Claimed, RenderedPage, TextLayer, list[pictures.Region]]],
                      outcomes: dict[str, job_states.PageOutcome], max_attempts: int) -> None:
    """Whole pages and the pictures of pages read from their text, in one call (one batch on the GPU)."""
    images = [rendered.image for _, rendered in ready] + [r.image for *_, regions in mixed for r in regions]
    started = time.perf_counter()
    try:
        with tracing.span("engine.read", engine=ctx.engine.name, pages=len(ready), pictures=len(images) - len(ready)):
            results = ctx.engine.read(images)
            tracing.annotate(engine_url=_engine_urls(results))
    except Exception as exc:
        _raise_unless_defect(exc)
        _defect(ctx, [c for c, _ in ready] + [c for c, *_ in mixed], outcomes, max_attempts, "the engine read it")
        return
    elapsed = time.perf_counter() - started
    results, picture_results = results[:len(ready)], results[len(ready):]
    for c, rendered, layer, regions in mixed:
        read, picture_results = picture_results[:len(regions)], picture_results[len(regions):]
        failed = next((r for r in read if isinstance(r, EngineError)), None)
        ctx.metrics.page_read(engine=ctx.engine.name, seconds=elapsed, result=failed or read[0])
        if _engine_down(ctx, failed, c):
            _retry_later(ctx, c, refund=True)
        elif failed is not None and failed.retryable and c.attempts < max_attempts:
            _retry_later(ctx, c)
        elif failed is not None:
            outcomes[c.page.id] = _outcome(failed, rendered)
        else:
            with _defects_fail(ctx, c, outcomes, max_attempts):
                outcomes[c.page.id] = _mixed_outcome(layer, regions, read)
    for (c, rendered), result in zip(ready, results, strict=True):
        ctx.metrics.page_read(engine=ctx.engine.name, seconds=elapsed, result=result)
        if _engine_down(ctx, result, c):
            _retry_later(ctx, c, refund=True)
        elif isinstance(result, EngineError) and result.retryable and c.attempts < max_attempts:
            _retry_later(ctx, c)
        else:
            with _defects_fail(ctx, c, outcomes, max_attempts):
                outcomes[c.page.id] = _outcome(result, rendered, text_layer=_text_layer(ctx, c, rendered, result))


@contextmanager
def _defects_fail(ctx: WorkerContext, c: Claimed, outcomes: dict[str, job_states.PageOutcome],
                  max_attempts: int) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        _raise_unless_defect(exc)
        _defect(ctx, [c], outcomes, max_attempts, "its result was put together")


def _raise_unless_defect(exc: Exception) -> None:
    """Raise again what is no defect of ocrq's: the task's soft time limit, also inside another error (rapidocr,
    which the line detector runs too, wraps it in its own), and an outage, which the task waits out."""
    if (limit := time_limit_in(exc)) is not None:
        raise limit from None
    if isinstance(exc, outages.OUTAGE_TYPES):
        raise exc


def _defect(ctx: WorkerContext, pages: list[Claimed], outcomes: dict[str, job_states.PageOutcome],
            max_attempts: int, doing: str) -> None:
    """A defect met on these pages, not an outage: each is read again at once while it has attempts left (the
    cause may pass), then fails with a reason, rather than running on until the sweeper's long wait."""
    log.exception("unexpected error on %d page(s) while %s", len(pages), doing)
    for c in pages:
        if c.attempts < max_attempts:
            _retry_later(ctx, c)
        else:
            outcomes[c.page.id] = job_states.PageOutcome(error=internal_error(c.page.index, attempts=c.attempts))


def _own_text(ctx: WorkerContext, c: Claimed) -> job_states.PageOutcome | TextLayer | None:
    """A PDF page read from its own text where the job allows it and the text can be trusted; its text layer
    when its pictures are to be OCR'd (a `mixed` page); None: OCR it."""
    if c.job.ocr == "always" or not reads_as_pdf(c.job.doc_kind):
        return None
    with tracing.span("text_layer", job=c.job.id, page=c.page.index + 1):
        layer = read_text_layer(ctx.sources.path(c.job), c.page.index, limits=ctx.limits)
    if layer.trusted and layer.pictures and c.job.ocr == "auto":
        return layer
    return _layer_outcome(c.job, c.page.index, layer)


def _layer_outcome(job: Job, index: int, layer: TextLayer) -> job_states.PageOutcome | None:
    """The page's outcome from its text layer: read, or failed for ocr=never; None: OCR it, or (in auto) read
    its pictures with the engine in its page task."""
    if not layer.trusted:
        log.info("page OCR'd: %s", layer.reason, extra=layer.counts)
        if job.ocr == "never":
            return job_states.PageOutcome(error=f"page {index + 1} has no text layer to read (ocr=never): "
                                                f"{layer.reason}", width=layer.width, height=layer.height)
        return None
    if layer.pictures and job.ocr == "auto":
        return None
    return _text_outcome(layer)


def _text_outcome(layer: TextLayer) -> job_states.PageOutcome:
    read = text_layer.read(layer)
    return job_states.PageOutcome(text=read.text, engine=read.engine, model=read.model, seconds=read.seconds,
                                  rotation=0, blocks=read.blocks, confidence=read.confidence, width=layer.width,
                                  height=layer.height, source="text_layer")


def _mixed_outcome(layer: TextLayer, regions: list[pictures.Region],
                   results: list[PageText]) -> job_states.PageOutcome:
    """The page's text layer with the lines the engine read in its pictures, in one reading order: `mixed`, or
    `text_layer` when its pictures hold no text."""
    own = text_layer.text_lines(layer)
    found = [line for region, result in zip(regions, results, strict=True)
             for line in pictures.lines(region, result, own)]
    if not found:
        return _text_outcome(layer)
    read = text_layer.read(layer, found)
    engine = results[0]
    return job_states.PageOutcome(text=read.text, engine=f"{read.engine}+{engine.engine}"[:32],
                                  engine_url=engine.details.get("url"), model=f"{read.model}+{engine.model}"[:256],
                                  seconds=read.seconds + sum(r.seconds for r in results), rotation=0,
                                  blocks=read.blocks, confidence=page_confidence(read.blocks), width=layer.width,
                                  height=layer.height, source="mixed")


def time_out_pages(ctx: WorkerContext, *, page_ids: list[str]) -> None:
    """Pages of a task past its soft time limit that are still unwritten: a busy machine slows a page, so it is
    read again while it has attempts left; then it fails with that reason, and its job closes."""
    outcome = job_states.PageOutcome(error=f"timed out after {ctx.settings.task_soft_time_limit_s} s")
    with ctx.db.session() as session:
        pages = list(session.scalars(select(Page).where(Page.id.in_(page_ids))))
        jobs = {job.id: job for job in session.scalars(select(Job).where(Job.id.in_({p.job_id for p in pages})))}
    retried = {page.id for page in pages if page.status == "running" and page.attempts <= ctx.settings.page_retries}
    for page in pages:
        if page.id in retried:
            _retry_later(ctx, Claimed(page=page, job=jobs[page.job_id], attempts=page.attempts))
    _write_outcomes(ctx, [(page, outcome) for page in pages if page.id not in retried])


def _write_outcomes(ctx: WorkerContext, finished: list[tuple[Page, job_states.PageOutcome]]) -> None:
    """Write each page's outcome once, and in the same transaction close its job if it was the last."""
    for page, outcome in finished:
        bind_job(job_id=page.job_id, page=page.index + 1, page_id=page.id)
        try:
            written, closed = _write_outcome(ctx, page, outcome)
        except Exception as exc:
            _raise_unless_defect(exc)
            # What was read cannot be stored (a defect, not an outage): writing it again would fail again.
            log.exception("page %d's result could not be written", page.index + 1)
            outcome = job_states.PageOutcome(error=internal_error(page.index, attempts=page.attempts or 1))
            written, closed = _write_outcome(ctx, page, outcome)
        if written:
            page_written(ctx, outcome)
        finish_closing(ctx, job_id=page.job_id, closed=closed)


def _write_outcome(ctx: WorkerContext, page: Page, outcome: job_states.PageOutcome) -> tuple[bool, str | None]:
    with tracing.span("write", job=page.job_id, page=page.index + 1), ctx.db.session() as session:
        written = job_states.finish_page(session, page_id=page.id, outcome=outcome)
        if written:
            events.page_ended(session, job_id=page.job_id, page_id=page.id)
        return written, close_in(session, ctx, job_id=page.job_id)


def _bucket(page: Page) -> str | None:
    return buckets.bucket_of(page.width, page.height) if page.width and page.height else None


def _engine_urls(results: list[PageText | EngineError]) -> str | None:
    urls = sorted({url for result in results if isinstance(result, PageText) and (url := result.details.get("url"))})
    return ",".join(urls) or None


def _claim(ctx: WorkerContext, *, page_id: str, delivery: str | None) -> Claimed | None:
    """The page, its job and this attempt's number; None if it is not ours to read now."""
    try:
        with ctx.db.session() as session:
            attempts = tenant_cap.claim_page(session, page_id=page_id, settings=ctx.settings, worker=ctx.worker,
                                             delivery=delivery)
            if attempts is None:
                return None
            page = session.get(Page, page_id)
            return Claimed(page=page, job=session.get(Job, page.job_id), attempts=attempts)
    except tenant_cap.OverCap as over:
        tenant_cap.defer(ctx, page_id=page_id, lane=over.lane)
        return None


# What a tenant reads for an engine failure: engine addresses and client errors stay in the worker's log.
ENGINE_FAILURES = {
    "oom": "the engine ran out of memory on this page",
    "overloaded": "the engine stayed overloaded through every retry",
    "unavailable": "no engine could be reached",
    "timeout": "the engine did not answer in time",
    "invalid": "the engine refused this page",
}


def _outcome(result: PageText | EngineError, rendered: RenderedPage, *,
             text_layer: dict | None = None) -> job_states.PageOutcome:
    size = {"width": rendered.width, "height": rendered.height}
    if isinstance(result, EngineError):
        log.warning("engine failed on the page: %s: %s", result.kind, result)
        reason = ENGINE_FAILURES.get(result.kind, str(result) if result.kind == "repetition" else "the engine failed")
        return job_states.PageOutcome(error=f"{result.kind}: {reason}", **size)
    return job_states.PageOutcome(text=result.text, engine=result.engine, engine_url=result.details.get("url"),
                                  source="ocr",
                                  model=result.model, seconds=result.seconds, rotation=result.rotation,
                                  blocks=result.blocks, text_layer=text_layer, **size,
                                  confidence=result.confidence if result.confidence is not None
                                  else page_confidence(result.blocks))


def _text_layer(ctx: WorkerContext, c: Claimed, rendered: RenderedPage, result: PageText | EngineError) -> dict | None:
    """Line boxes for a PDF result from an engine that reads without positions; only jobs that asked for one."""
    if c.job.output != "pdf" or not isinstance(result, PageText) or not result.text.strip():
        return None
    if result.blocks and not estimated(result.blocks):
        return None
    return ctx.line_detector.text_layer(rendered.image, result.text, rotation=result.rotation or 0)


def page_written(ctx: WorkerContext, outcome: job_states.PageOutcome) -> None:
    """Count and log a page whose result was just written (once, by the delivery that wrote it)."""
    ctx.metrics.page_done("failed" if outcome.error else "succeeded", source=outcome.source)
    if outcome.error:
        log.warning("page failed: %s", outcome.error)
    else:
        log.info("page read", extra={"seconds": outcome.seconds, "chars": len(outcome.text or "")})


def _engine_down(ctx: WorkerContext, result: PageText | EngineError, c: Claimed) -> bool:
    """No engine answered at all: not the page's fault, so it waits for one without using up its attempts,
    for as long as its job is younger than engine_outage_grace_s."""
    if not (isinstance(result, EngineError) and result.kind == "unavailable"):
        return False
    return _within_outage_grace(ctx, c.job)


def _within_outage_grace(ctx: WorkerContext, job: Job) -> bool:
    """Work waits out an outage (engine, storage) without using attempts while its job is this young."""
    return (utcnow() - job.created_at).total_seconds() < ctx.settings.engine_outage_grace_s


def _retry_later(ctx: WorkerContext, c: Claimed, *, refund: bool = False) -> None:
    with ctx.db.session() as session:
        job_states.requeue_page(session, page_id=c.page.id, refund_attempt=refund)
    ctx.metrics.page_done("retried")
    log.info("page put back for a retry", extra={"attempts": c.attempts, "engine_down": refund})
    countdown = ctx.settings.engine_outage_retry_s if refund else min(2**c.attempts, 60)
    routing.route_pages(ctx, sizes={c.page.id: (c.page.width, c.page.height)}, lane=c.job.priority,
                        countdown=countdown)
