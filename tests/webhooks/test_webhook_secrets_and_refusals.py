"""Signing secrets from the CLI, their rotation window, and webhook URLs refused at submit time."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from common.orm import utcnow
from common.webhooks import secrets as webhook_secrets
from common.webhooks.models import WebhookSecret
from tests.conftest import KEY_A, make_settings
from tests.support.stack import ROOT, Stack, settings_env


def test_cli_prints_and_rotates_a_tenant_secret(stack):
    env = settings_env(stack.settings)

    def secret(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cli.main", "webhooks", "secret", "--tenant", "tenant-cli",
                               *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = secret()
    assert first.startswith("whsec_") and secret() == first
    rotated = secret("--rotate")
    assert rotated.startswith("whsec_") and rotated != first
    with stack.services.db.session() as session:
        row = webhook_secrets.get_or_create(session, tenant_id="tenant-cli")
        assert (row.current, row.previous) == (rotated, first)
        assert webhook_secrets.live(row, now=utcnow()) == [rotated, first]


def test_previous_secret_stops_signing_after_the_overlap():
    row = WebhookSecret(tenant_id="t", current="whsec_new", previous="whsec_old",
                        previous_until=utcnow() + timedelta(hours=1))
    assert webhook_secrets.live(row, now=utcnow()) == ["whsec_new", "whsec_old"]
    assert webhook_secrets.live(row, now=utcnow() + timedelta(hours=2)) == ["whsec_new"]


def test_metadata_address_is_refused_at_submit(stack):
    response = stack.client(KEY_A).post(
        "/jobs", json={"source_url": "http://127.0.0.1:9/a.png",
                       "webhook_url": "http://169.254.169.254/latest/meta-data/"})
    assert response.status_code == 422
    assert "webhook_url refused" in response.json()["detail"] and "link-local" in response.json()["detail"]


@pytest.fixture(scope="module")
def no_allowlist(tmp_path_factory, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("no-allowlist"), pg_url=pg_url, redis_url=redis_url,
                             s3=s3, net_allowlist=[])
    with Stack(settings, logs=tmp_path_factory.mktemp("no-allowlist-logs")) as running:
        yield running


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]/hook"])
def test_loopback_is_refused_without_the_allowlist(no_allowlist, url):
    response = no_allowlist.client(KEY_A).post("/jobs", json={"source_url": "https://example.com/a.png",
                                                              "webhook_url": url})
    assert response.status_code == 422, response.text
    assert "loopback" in response.json()["detail"]
