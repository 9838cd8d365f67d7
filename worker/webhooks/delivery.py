"""One try of a webhook delivery: claim it, sign it, send it once, record the answer, schedule the next.

Sending is at least once: a worker that dies after the receiver answered but before the answer was
recorded leaves its lease to expire, and the sweeper sends the same body with the same webhook-id
again, which the receiver deduplicates.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, or_, update

from common import tracing
from common.orm import new_id, utcnow
from common.sql import insert_ignoring_conflicts
from common.webhooks import secrets as webhook_secrets
from common.webhooks import service as webhooks
from common.webhooks.log import url_digest
from common.webhooks.models import DisabledEndpoint, WebhookAttempt, WebhookDelivery
from common.webhooks.sender import Attempt, next_delay, send_once
from common.webhooks.signing import sign
from worker.context import WorkerContext

# Time after the request's own timeout for the answer to be written before another worker may take over.
LEASE_MARGIN_S = 5.0
# A message may arrive a little before its due time (clocks of different hosts, ETA rounding).
EARLY_SLACK_S = 1.0
LOST = "the worker stopped before the answer was recorded"


@dataclass(frozen=True)
class Claim:
    delivery_id: str
    token: str
    number: int
    tries: int
    tenant_id: str
    url: str
    body: str


def deliver(ctx: WorkerContext, *, delivery_id: str) -> str | None:
    """One try of a due delivery; the outcome, or None when it is not due or another worker holds it."""
    claim = _claim(ctx, delivery_id=delivery_id)
    if claim is None:
        return None
    now = utcnow()
    with ctx.db.session() as session:
        disabled = session.get(DisabledEndpoint, (claim.tenant_id, url_digest(claim.url)))
        secrets = webhook_secrets.live(webhook_secrets.get_or_create(session, tenant_id=claim.tenant_id), now=now)
    if disabled is not None:
        attempt = Attempt(None, 0, f"not sent: the endpoint answered 410 Gone on {disabled.disabled_at:%Y-%m-%d %H:%M}"
                          " and stays disabled until a redelivery", "failed")
    else:
        s = ctx.settings
        body = claim.body.encode()
        headers = sign(secrets=secrets, msg_id=f"msg_{claim.delivery_id}", timestamp=now, body=body)
        with tracing.span("webhook.send", tenant=claim.tenant_id, delivery=claim.delivery_id, attempt=claim.number):
            attempt = send_once(url=claim.url, body=body, headers=headers, allowlist=s.net_allowlist,
                                timeout_s=s.webhook_timeout_s, max_response_bytes=s.webhook_max_response_bytes)
    return _record(ctx, claim=claim, attempt=attempt)


def _claim(ctx: WorkerContext, *, delivery_id: str) -> Claim | None:
    now = utcnow()
    token = new_id()
    lease = timedelta(seconds=ctx.settings.webhook_timeout_s + LEASE_MARGIN_S)
    d = WebhookDelivery
    with ctx.db.session() as session:
        row = session.execute(
            update(d)
            .where(d.id == delivery_id, d.status == "pending",
                   d.next_attempt_at <= now + timedelta(seconds=EARLY_SLACK_S),
                   or_(d.lease_until.is_(None), d.lease_until < now))
            .values(lease_token=token, lease_until=now + lease, tries=d.tries + 1, attempts=d.attempts + 1)
            .returning(d.tries, d.attempts, d.tenant_id, d.url, d.body)
        ).first()
        if row is None:
            return None
        session.execute(
            update(WebhookAttempt)
            .where(WebhookAttempt.delivery_id == delivery_id, WebhookAttempt.outcome == "sending")
            .values(outcome="lost", error=LOST)
        )
        session.add(WebhookAttempt(delivery_id=delivery_id, number=row.attempts, started_at=now))
    return Claim(delivery_id, token, row.attempts, row.tries, row.tenant_id, row.url, row.body)


def _record(ctx: WorkerContext, *, claim: Claim, attempt: Attempt) -> str:
    now = utcnow()
    d = WebhookDelivery
    # Only the lease holder moves a pending delivery on; a 2xx is recorded whoever holds it.
    held = and_(d.id == claim.delivery_id, d.status == "pending", d.lease_token == claim.token)
    released = {"lease_token": None, "lease_until": None}
    outcome, countdown = attempt.outcome, None
    with ctx.db.session() as session:
        session.execute(
            update(WebhookAttempt)
            .where(WebhookAttempt.delivery_id == claim.delivery_id, WebhookAttempt.number == claim.number)
            .values(outcome=attempt.outcome, status_code=attempt.status_code, latency_ms=attempt.latency_ms,
                    error=attempt.error)
        )
        if outcome == "delivered":
            session.execute(update(d).where(d.id == claim.delivery_id, d.status == "pending").values(
                status="delivered", finished_at=now, last_error=None, **released))
            return outcome
        if outcome == "disable":
            insert_ignoring_conflicts(session, DisabledEndpoint, [{
                "tenant_id": claim.tenant_id, "url_digest": url_digest(claim.url), "url": claim.url,
                "reason": attempt.error, "disabled_at": now,
            }], keys=["tenant_id", "url_digest"])
            session.execute(update(d).where(held).values(
                status="failed", finished_at=now, last_error=f"{attempt.error} (endpoint disabled)", **released))
            return "failed"
        delay = None
        if outcome == "retry":
            delay = next_delay(attempt_no=claim.tries, schedule_s=ctx.settings.webhook_retry_schedule_s,
                               retry_after_s=attempt.retry_after_s, rng=random.Random())
        if delay is None:
            last = " (last try)" if outcome == "retry" else ""
            session.execute(update(d).where(held).values(
                status="failed", finished_at=now, last_error=f"{attempt.error}{last}", **released))
            return "failed"
        # Short waits ride on a countdown message; long ones are left to the sweeper, because Redis would
        # hand a message held past its visibility timeout to a second worker.
        short = delay <= ctx.settings.stale_requeue_after_s / 2
        updated = session.execute(update(d).where(held).values(
            next_attempt_at=now + timedelta(seconds=delay), last_error=attempt.error,
            published_at=now if short else None, **released)).rowcount
        countdown = delay if short and updated else None
    if countdown is not None:
        webhooks.publish(ctx.app, delivery_id=claim.delivery_id, countdown=countdown)
    return "retry"
