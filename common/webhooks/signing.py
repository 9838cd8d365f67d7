"""Standard Webhooks signatures: webhook-id, webhook-timestamp and one v1 signature per live secret."""

from __future__ import annotations

import base64
import secrets as _random
from datetime import datetime, timezone

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def sign(*, secrets: list[str], msg_id: str, timestamp: datetime, body: bytes) -> dict[str, str]:
    """Headers for one message, signed with every secret so receivers verify during a rotation."""
    if not secrets:
        raise ValueError("at least one secret is needed to sign")
    # The library replaces tzinfo instead of converting, so hand it UTC; a naive time is taken as UTC.
    utc = timestamp.astimezone(timezone.utc) if timestamp.tzinfo else timestamp.replace(tzinfo=timezone.utc)
    data = body.decode("utf-8")
    signatures = [Webhook(secret).sign(msg_id=msg_id, timestamp=utc, data=data) for secret in secrets]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(utc.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def new_secret() -> str:
    """A fresh random signing secret in the whsec_ form."""
    return SECRET_PREFIX + base64.b64encode(_random.token_bytes(SECRET_BYTES)).decode("ascii")
