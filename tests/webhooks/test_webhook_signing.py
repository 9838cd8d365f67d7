"""Our signatures as the standardwebhooks verifier sees them."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from common.webhooks.signing import new_secret, sign

BODY = b'{"type":"job.succeeded","data":{"id":"job_1","status":"succeeded"}}'


def _now() -> datetime:
    return datetime.now(timezone.utc)


def test_verifier_accepts_what_we_send():
    secret = new_secret()
    headers = sign(secrets=[secret], msg_id="msg_1", timestamp=_now(), body=BODY)
    assert headers["webhook-id"] == "msg_1"
    assert Webhook(secret).verify(BODY, headers)["data"]["id"] == "job_1"


def test_changed_body_is_rejected():
    secret = new_secret()
    headers = sign(secrets=[secret], msg_id="msg_1", timestamp=_now(), body=BODY)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(secret).verify(BODY.replace(b"succeeded", b"failed"), headers)


def test_changed_id_is_rejected():
    secret = new_secret()
    headers = sign(secrets=[secret], msg_id="msg_1", timestamp=_now(), body=BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, {**headers, "webhook-id": "msg_2"})


def test_old_timestamp_is_rejected():
    secret = new_secret()
    headers = sign(secrets=[secret], msg_id="msg_1", timestamp=_now() - timedelta(minutes=10), body=BODY)
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(BODY, headers)


def test_rotation_sends_one_signature_per_secret():
    old, new = new_secret(), new_secret()
    headers = sign(secrets=[old, new], msg_id="msg_1", timestamp=_now(), body=BODY)
    parts = headers["webhook-signature"].split(" ")
    assert len(parts) == 2 and all(part.startswith("v1,") for part in parts)
    Webhook(old).verify(BODY, headers)
    Webhook(new).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)


def test_timestamp_in_another_zone_is_the_same_instant():
    secret = new_secret()
    moment = datetime.now(timezone(timedelta(hours=-5)))
    headers = sign(secrets=[secret], msg_id="msg_1", timestamp=moment, body=BODY)
    assert headers["webhook-timestamp"] == str(int(moment.timestamp()))
    Webhook(secret).verify(BODY, headers)


def test_new_secret_shape():
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32


def test_signing_needs_a_secret():
    with pytest.raises(ValueError):
        sign(secrets=[], msg_id="msg_1", timestamp=_now(), body=BODY)
