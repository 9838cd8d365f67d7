"""Liveness, not timeouts, decides when a worker's work is abandoned.

Every worker keeps a lease row "worker:<instance>" alive with a heartbeat that lists the pages of every message
it holds unacked: running, prefetched, waiting out a countdown (deferred by the tenant cap, an outage retry) or
gathered into a GPU batch. A page claim records the claimer's lease. The same table elects the one scheduler that
runs the sweepers; when a worker's lease lapses (heartbeat_lapse_s), that scheduler deletes it with a
compare-and-set, so its pages go back on their queues exactly once, whatever the broker's visibility timeout, and
drops the dead worker's copies from the broker's unacked hash. A running page whose claimer is alive is never
claimed by a second worker (job_states.claimable); if that claimer no longer holds it (its pool child died, or a
hard time limit killed it), the scheduler queues it again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis
from celery import beat, signals
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from common.db import Database
from common.jobs.models import Job, Page
from common.jobs.states import PAGE_ACTIVE
from common.orm import new_id, utcnow
from common.queue import depth, names
from common.queue.leases import Lease
from common.settings import Settings
from common.sql import insert_ignoring_conflicts
from worker.context import WorkerContext, context_of
from worker.jobs import routing

log = logging.getLogger("ocrq.liveness")
SCHEDULER = "scheduler"
WORKER_PREFIX = "worker:"


def new_worker_name() -> str:
    return f"{WORKER_PREFIX}{new_id()}"


def renew(session: Session, *, name: str, holder: str, lapse_s: float, pages: list[str] | None = None,
          steal_lapsed: bool = True, now: datetime | None = None) -> bool:
    """Extend the lease `name` for `holder`, taking it if free or lapsed; False if someone else holds it. `now`: when
    `pages` was read (beat_at), so no page claimed after that read looks left behind by a live worker."""
    now = now or utcnow()
    values = {"holder": holder, "pages": pages, "beat_at": now, "expires_at": now + timedelta(seconds=lapse_s)}
    insert_ignoring_conflicts(session, Lease, [{"name": name, **values}], keys=["name"])
    mine = (Lease.holder == holder) | (Lease.expires_at < now) if steal_lapsed else Lease.holder == holder
    return session.execute(update(Lease).where(Lease.name == name, mine).values(**values)).rowcount == 1


class HeldRequests:
    """Every task request this worker process took whose message it has not acked yet.

    Celery's reserved requests miss a message that waits out an ETA or countdown (a page deferred by the tenant
    cap, an outage retry): its timer holds those until they are due, unacked all the while. The task_received
    signal sees every message, before Celery (or celery-batches) decides when to run it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[int, Any] = {}

    def connect(self) -> HeldRequests:
        signals.task_received.connect(self._received, weak=False)
        return self

    def _received(self, request=None, **_kwargs) -> None:
        with self._lock:
            self._requests[id(request)] = request

    def unacked(self) -> list:
        """The requests still held, forgetting those acked, rejected or requeued, or whose channel closed."""
        with self._lock:
            self._requests = {key: request for key, request in self._requests.items() if _unacked(request)}
            return list(self._requests.values())


def _unacked(request) -> bool:
    message = request.message
    return not (request.acknowledged or message.acknowledged or getattr(message.channel, "closed", False))


def held_pages(app, held: HeldRequests | None = None) -> list[str]:
    """Page ids of the messages this worker process holds unacked: prefetched, running, waiting for an ETA or
    countdown, or gathered into a GPU batch."""
    from celery.worker import state

    requests = list(state.reserved_requests) + (held.unacked() if held else [])
    # GPU batching tasks keep their messages to themselves, from arrival until their batch returns.
    for task in list(app.tasks.values()):
        if task.name.startswith(names.GPU_TASK_PREFIX) and hasattr(task, "held"):
            requests += task.held()
    ids = []
    for request in requests:
        if names.is_page_task(request.name):
            ids.extend(str(arg) for arg in (request.args or [])[:1])
    return list(dict.fromkeys(ids))


class Heartbeat:
    """The thread that keeps a worker's lease alive; stop() removes the lease on a clean shutdown."""

    def __init__(self, app, settings: Settings, *, name: str, holder: str, held: HeldRequests | None = None) -> None:
        self.app, self.settings, self.name, self.holder, self.held = app, settings, name, holder, held
        self.db = Database(settings.resolved_database_url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ocrq-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def beat(self) -> None:
        now = utcnow()
        pages = held_pages(self.app, self.held)
        with self.db.session() as session:
            renew(session, name=self.name, holder=self.holder, lapse_s=self.settings.heartbeat_lapse_s, pages=pages,
                  steal_lapsed=False, now=now)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except Exception:  # the database may be restarting: beat again next time, the lease has slack
                log.warning("heartbeat not recorded", exc_info=True)
            self._stop.wait(self.settings.heartbeat_interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            with self.db.session() as session:
                session.execute(delete(Lease).where(Lease.name == self.name))
        finally:
            self.db.dispose()


def leased_pages(session: Session) -> set[str]:
    """The pages that workers' leases name: a live worker holds them, or a lapsed lease's are recover_lapsed's."""
    leases = session.scalars(select(Lease.pages).where(Lease.name.startswith(WORKER_PREFIX)))
    return {str(page_id) for pages in leases for page_id in (pages or [])}


def recover_lapsed(ctx: WorkerContext) -> int:
    """Put back the pages of workers whose heartbeat lapsed, once per lapsed lease; returns how many pages."""
    now, taken_before = utcnow(), time.time()
    with ctx.db.session() as session:
        lapsed = session.execute(select(Lease.name, Lease.expires_at, Lease.pages).where(
            Lease.name.startswith(WORKER_PREFIX), Lease.expires_at < now)).all()
    recovered = 0
    for name, expires_at, pages in lapsed:
        with ctx.db.session() as session:
            if not session.execute(delete(Lease).where(Lease.name == name, Lease.expires_at == expires_at)).rowcount:
                continue  # another sweeper took it
            ids = _take_back(session, owner=name, page_ids=list(pages or []))
        # The dead worker's copies stay in the broker's unacked hash until the visibility timeout: drop them first,
        # so the only copy of each page is the one published now.
        try:
            depth.drop_held_pages(ctx.settings, page_ids=ids, taken_before=taken_before)
        except redis.RedisError:  # they come back at the visibility timeout, and find their pages done
            log.warning("a dead worker's unacked messages not dropped", exc_info=True)
        recovered += _publish(ctx, ids)
        log.warning("worker heartbeat lapsed; its pages are queued again", extra={"worker": name, "pages": len(ids)})
    with ctx.db.session() as session:  # pages whose live claimer no longer holds them (its pool child died)
        ids = _take_back_orphans(session, now=now)
    return recovered + _publish(ctx, ids)


def _take_back(session: Session, *, owner: str, page_ids: list[str]) -> list[str]:
    """Queue again the active pages the dead worker held or had claimed, unless another worker claimed them."""
    held = select(Page.id).where(Page.status.in_(PAGE_ACTIVE), (Page.id.in_(page_ids)) | (Page.claimed_by == owner),
                                 (Page.claimed_by.is_(None)) | (Page.claimed_by == owner) | (Page.status == "queued"))
    ids = list(session.scalars(held))
    if ids:
        session.execute(update(Page).where(Page.id.in_(ids), Page.status.in_(PAGE_ACTIVE))
                        .values(status="queued", claimed_by=None, enqueued_at=utcnow()))
    return ids


def _take_back_orphans(session: Session, *, now) -> list[str]:
    leases = {lease.name: lease for lease in session.scalars(select(Lease).where(Lease.name.startswith(WORKER_PREFIX)))}
    running = session.execute(select(Page.id, Page.claimed_by, Page.started_at).where(
        Page.status == "running", Page.claimed_by.in_(list(leases)))).all()
    ids = [page_id for page_id, owner, started in running
           if leases[owner].expires_at >= now and started is not None and started < leases[owner].beat_at
           and page_id not in (leases[owner].pages or [])]
    if ids:
        session.execute(update(Page).where(Page.id.in_(ids), Page.status == "running")
                        .values(status="queued", claimed_by=None, enqueued_at=utcnow()))
    return ids


def _publish(ctx, page_ids: list[str]) -> int:
    if not page_ids:
        return 0
    with ctx.db.session() as session:
        lanes = session.execute(select(Page.id, Job.priority).join(Job).where(Page.id.in_(page_ids))).all()
    by_lane: dict[str, list[str]] = defaultdict(list)
    for page_id, lane in lanes:
        by_lane[lane].append(page_id)
    for lane, ids in by_lane.items():
        routing.route_stored_pages(ctx, page_ids=ids, lane=lane, ahead=True)
    return len(page_ids)


class ElectedScheduler(beat.Scheduler):
    """Celery beat that sends only while it holds the scheduler lease: every worker may run it, one does.

    The leader also takes back the pages of lapsed workers itself, every heartbeat interval, rather than through a
    task: a task would wait on the control queue behind the page each pool process is reading.
    """

    def setup_schedule(self) -> None:
        super().setup_schedule()
        settings: Settings = self.app.ocrq_settings
        self._settings, self._db = settings, Database(settings.resolved_database_url)
        self._me, self._leading, self._lease = new_id(), False, scheduler_lease(settings)
        self._recovered_at = 0.0

    def _recover(self) -> None:
        if time.monotonic() - self._recovered_at < self._settings.heartbeat_interval_s:
            return
        self._recovered_at = time.monotonic()
        try:
            if recovered := recover_lapsed(context_of(self.app)):
                log.warning("%d pages of lost workers queued again", recovered)
        except Exception:  # the database or the broker is away: the next tick tries again
            log.warning("lapsed workers' pages not taken back", exc_info=True)

    def tick(self, *args, **kwargs) -> float:
        renew_s = min(self._settings.heartbeat_lapse_s / 3, self._settings.heartbeat_interval_s)
        try:
            with self._db.session() as session:
                leading = renew(session, name=self._lease, holder=self._me, lapse_s=self._settings.heartbeat_lapse_s)
        except Exception:  # database unreachable: do not lead on a stale lease
            log.warning("scheduler lease not renewed", exc_info=True)
            leading = False
        if leading != self._leading:
            log.warning("this worker %s the sweepers' schedule", "now runs" if leading else "no longer runs")
            self._leading = leading
        if not leading:
            return renew_s
        self._recover()
        return min(super().tick(*args, **kwargs), renew_s)

    def close(self) -> None:
        """Hand the lease back on a clean stop, so another worker takes over at its next tick."""
        super().close()
        try:
            with self._db.session() as session:
                session.execute(delete(Lease).where(Lease.name == self._lease, Lease.holder == self._me))
        except Exception:  # it lapses on its own
            log.warning("scheduler lease not handed back", exc_info=True)


def scheduler_lease(settings: Settings) -> str:
    """One scheduler per broker (and key prefix): the deployment whose queues it sends to."""
    digest = hashlib.sha256(f"{broker_identity(settings.resolved_broker_url)}|{settings.broker_key_prefix}".encode())
    return f"{SCHEDULER}:{digest.hexdigest()[:16]}"


def broker_identity(url: str) -> str:
    """The Redis server and database a URL names, however a host spells it (credentials, defaults, case)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("redis", "rediss"):
        return url
    database = parse_qs(parts.query).get("db", [parts.path.strip("/") or "0"])[0]
    return f"{(parts.hostname or 'localhost').lower()}:{parts.port or 6379}/{int(database)}"
