"""Liveness, not timeouts, decides when a worker's work is abandoned.

Every worker keeps a lease row "worker:<instance>" alive with a heartbeat that lists the pages it has
received, running or prefetched. A page claim records the claimer's lease. When a lease lapses
(heartbeat_lapse_s), the sweeper deletes it with a compare-and-set, so exactly one sweeper puts its pages
back on their queues, whatever the broker's visibility timeout. A running page whose claimer is alive is
never claimed by a second worker (job_states.claimable); if that claimer no longer holds it (its pool child
died, or a hard time limit killed it), the sweeper queues it again. The same table elects the one scheduler that runs the sweepers.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import defaultdict
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from celery import beat
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from common.db import Database
from common.jobs.models import Job, Page
from common.jobs.states import PAGE_ACTIVE
from common.orm import new_id, utcnow
from common.queue import names
from common.queue.leases import Lease
from common.settings import Settings
from common.sql import insert_ignoring_conflicts
from worker.jobs import routing

log = logging.getLogger("ocrq.liveness")
SCHEDULER = "scheduler"
WORKER_PREFIX = "worker:"


def new_worker_name() -> str:
    return f"{WORKER_PREFIX}{new_id()}"


def renew(session: Session, *, name: str, holder: str, lapse_s: float, pages: list[str] | None = None,
          steal_lapsed: bool = True) -> bool:
    """Extend the lease `name` for `holder`, taking it if free or lapsed; False if someone else holds it."""
    now = utcnow()
    values = {"holder": holder, "pages": pages, "beat_at": now, "expires_at": now + timedelta(seconds=lapse_s)}
    insert_ignoring_conflicts(session, Lease, [{"name": name, **values}], keys=["name"])
    mine = (Lease.holder == holder) | (Lease.expires_at < now) if steal_lapsed else Lease.holder == holder
    return session.execute(update(Lease).where(Lease.name == name, mine).values(**values)).rowcount == 1


def held_pages(app) -> list[str]:
    """Page ids of the messages this worker process has received and not finished (prefetched or running)."""
    from celery.worker import state

    requests = list(state.reserved_requests)
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

    def __init__(self, app, settings: Settings, *, name: str, holder: str) -> None:
        self.app, self.settings, self.name, self.holder = app, settings, name, holder
        self.db = Database(settings.resolved_database_url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ocrq-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def beat(self) -> None:
        with self.db.session() as session:
            renew(session, name=self.name, holder=self.holder, lapse_s=self.settings.heartbeat_lapse_s,
                  pages=held_pages(self.app), steal_lapsed=False)

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


def recover_lapsed(ctx) -> int:
    """Put back the pages of workers whose heartbeat lapsed, once per lapsed lease; returns how many pages."""
    now = utcnow()
    with ctx.db.session() as session:
        lapsed = session.execute(select(Lease.name, Lease.expires_at, Lease.pages).where(
            Lease.name.startswith(WORKER_PREFIX), Lease.expires_at < now)).all()
    recovered = 0
    for name, expires_at, pages in lapsed:
        with ctx.db.session() as session:
            if not session.execute(delete(Lease).where(Lease.name == name, Lease.expires_at == expires_at)).rowcount:
                continue  # another sweeper took it
            ids = _take_back(session, owner=name, page_ids=list(pages or []))
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
        routing.route_stored_pages(ctx, page_ids=ids, lane=lane)
    return len(page_ids)


class ElectedScheduler(beat.Scheduler):
    """Celery beat that sends only while it holds the scheduler lease: every worker may run it, one does."""

    def setup_schedule(self) -> None:
        super().setup_schedule()
        settings: Settings = self.app.ocrq_settings
        self._settings, self._db = settings, Database(settings.resolved_database_url)
        self._me, self._leading, self._lease = new_id(), False, scheduler_lease(settings)

    def tick(self, *args, **kwargs) -> float:
        renew_s = self._settings.heartbeat_lapse_s / 3
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
