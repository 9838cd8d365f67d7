"""ocrq on four hosts that share only a network (tests/support/hosts.py), every part a real process:

    services  Postgres, Redis, SeaweedFS S3
    api       two `ocrq api` processes
    gpu-a     the CPU engine server (the stand-in for vLLM), a GPU worker and a CPU worker
    gpu-b     a GPU worker sending its pages to gpu-a's engine over the network, and a CPU worker

The GPU workers read every page (OCRQ_ENGINE=vllm on every host); the CPU workers split jobs, list batches,
run the sweepers' schedule and deliver webhooks. The test process is the outside world: the tenants' client
and their webhook receiver, on the network's first address.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from common import migrate
from common.queue.names import CONTROL_QUEUE, LISTING_QUEUE, PREPARE_BULK_QUEUE, WEBHOOK_QUEUE
from common.settings import Settings
from tests.conftest import KEY_A, KEY_B, SERVICE_GRANT, USER_BUCKET
from tests.support import seaweed, webhook_receiver
from tests.support.hosts import Host, Network
from tests.support.http import loopback
from tests.support.servers import PostgresServer, RedisServer
from tests.support.stack import ROOT, settings_env

BUCKET = "ocrq"
ENGINE_PORT = 8100
API_PORTS = (8000, 8001)
CPU_QUEUES = ",".join((LISTING_QUEUE, CONTROL_QUEUE, PREPARE_BULK_QUEUE, WEBHOOK_QUEUE))
METRICS_PORTS = {"cpu": 9101, "gpu": 9102}
LEADING = "now runs the sweepers' schedule"  # the log line of the worker that takes the scheduler's lease


@dataclass
class Process:
    host: Host
    name: str
    process: subprocess.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL this process and everything it started (its session)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


@dataclass
class Cluster:
    net: Network
    services: Host
    api: Host
    gpu_a: Host
    gpu_b: Host
    settings: Settings
    s3: seaweed.SeaweedS3
    logs: Path
    processes: list[Process] = field(default_factory=list)

    @property
    def api_urls(self) -> list[str]:
        return [f"http://{self.api.address}:{port}" for port in API_PORTS]

    @property
    def engine_url(self) -> str:
        return f"http://{self.gpu_a.address}:{ENGINE_PORT}"

    def engine_faults(self, mode: str, count: int = -1, delay_s: float = 0.0) -> None:
        spec = {"mode": mode, "count": count, "delay_s": delay_s}
        loopback().post(f"{self.engine_url}/admin/faults", json=spec, timeout=10).raise_for_status()

    def clear_engine_faults(self) -> None:
        loopback().delete(f"{self.engine_url}/admin/faults", timeout=10).raise_for_status()

    def client(self, key: str = KEY_A, api: int = 0) -> httpx.Client:
        return httpx.Client(base_url=self.api_urls[api], headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def start(self, host: Host, name: str, argv: list[str], env: dict[str, str] | None = None,
              module: str = "cli.main") -> Process:
        """`python -m MODULE ARGV` on `host` with the cluster's settings (and its own HOME)."""
        shared = settings_env(self.settings)
        shared.pop("OCRQ_HOME")  # each host's own ~/.ocrq
        log = self.logs / f"{host.name}-{name}.log"
        process = host.popen([sys.executable, "-m", module, *argv], log=log, cwd=ROOT,
                             env=host.env(shared | (env or {})))
        started = Process(host, name, process, log)
        self.processes.append(started)
        return started

    def start_worker(self, host: Host, kind: str, *args: str) -> Process:
        env = {"OCRQ_WORKER_METRICS_HOST": host.address, "OCRQ_WORKER_METRICS_PORT": str(METRICS_PORTS[kind])}
        if host is self.gpu_b:  # its own .env spells the same Redis another way: no database index, a user name
            env["OCRQ_BROKER_URL"] = self.settings.broker_url.replace("redis://", "redis://default@") \
                .removesuffix("/0")
        argv = ["worker", "--gpu", "--pool", "threads", "--concurrency", "2", "--no-beat"] if kind == "gpu" else \
            ["worker", "--beat", "--concurrency", "1", "--queues", CPU_QUEUES]
        return self.start(host, f"{kind}-worker", [*argv, *args], env=env)

    def wait_ready(self, process: Process, check, *, timeout: float = 120) -> Process:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.process.poll() is not None:
                raise RuntimeError(f"{process.host.name}/{process.name} exited:\n{process.text()[-3000:]}")
            if check(process):
                return process
            time.sleep(0.2)
        raise RuntimeError(f"{process.host.name}/{process.name} not ready in {timeout}s:\n{process.text()[-3000:]}")


def answers(url: str):
    def check(_process: Process) -> bool:
        try:
            return loopback().get(url, timeout=2).status_code == 200
        except httpx.TransportError:
            return False
    return check


def worker_ready(process: Process) -> bool:
    return b" ready." in process.log.read_bytes()


def build(work: Path, stack: ExitStack) -> Cluster:
    """Hosts, services and every ocrq process, started side by side and waited for."""
    net = stack.enter_context(Network(work / "hosts"))
    services, api, gpu_a, gpu_b = (net.host(name) for name in ("services", "api", "gpu-a", "gpu-b"))
    # Their usual ports: the host is theirs. (A free port of the test's namespace may be one already taken in
    # this one.) Postgres in a temporary folder of its own: pytest's are closed to the postgres account.
    pg = stack.enter_context(PostgresServer(host=services.address, on=services, port=5432))
    redis = stack.enter_context(RedisServer(host=services.address, on=services, port=6379,
                                            base_dir=services.home / "redis"))
    s3 = seaweed.start(services.home / "seaweed", host=services.address, on=services)
    stack.callback(s3.stop)
    for bucket in (BUCKET, USER_BUCKET):
        s3.client().create_bucket(Bucket=bucket)
    with psycopg.connect(pg.url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE ocrq")
    database_url = pg.database_url("ocrq")
    migrate.upgrade(database_url)
    logs = work / "logs"
    logs.mkdir()
    settings = Settings(
        database_url=database_url, broker_url=redis.url, storage_url=f"s3://{BUCKET}", s3_endpoint_url=s3.endpoint,
        s3_access_key_id=seaweed.ACCESS_KEY, s3_secret_access_key=seaweed.SECRET_KEY,
        api_keys=[f"tenant-a:{KEY_A}", f"tenant-b:{KEY_B}"], s3_source_profiles=SERVICE_GRANT,
        engine="vllm", engine_urls=[f"http://{gpu_a.address}:{ENGINE_PORT}"], engine_pair_size=1,
        # The tenants' webhook receiver is the test process; the hosts' own addresses stay refused.
        net_allowlist=[f"{net.address}/32"], webhook_retry_schedule_s=[0, 0.5, 1],
        # Short enough for a test, long enough that a page in hand is never taken as stale while read.
        stale_requeue_after_s=20, task_soft_time_limit_s=60, task_time_limit_s=90, visibility_timeout_s=120)
    cluster = Cluster(net=net, services=services, api=api, gpu_a=gpu_a, gpu_b=gpu_b, settings=settings, s3=s3,
                      logs=logs)
    stack.callback(lambda: [host.kill_all() for host in (api, gpu_a, gpu_b)])
    # The engine server itself (what `ocrq engine --backend cpu` starts), with its fault endpoints for the test.
    engine = cluster.start(gpu_a, "engine", ["--host", gpu_a.address, "--port", str(ENGINE_PORT), "--concurrency", "2",
                                             "--served-model-name", settings.engine_model, "--admin"],
                           module="worker.engines.server_cpu")
    apis = [cluster.start(api, f"api-{port}", ["api", "--host", api.address, "--port", str(port)])
            for port in API_PORTS]
    gpu_workers = [cluster.start_worker(gpu_a, "gpu"), cluster.start_worker(gpu_b, "gpu")]
    # gpu-b's CPU worker leads first, so it holds the scheduler's lease when its host dies.
    scheduler = cluster.start_worker(gpu_b, "cpu")
    cluster.wait_ready(scheduler, lambda process: LEADING in process.text())
    others = [cluster.start_worker(gpu_a, "cpu"), scheduler, *gpu_workers]
    cluster.wait_ready(engine, answers(f"{cluster.engine_url}/v1/models"))
    for process, url in zip(apis, cluster.api_urls, strict=True):
        cluster.wait_ready(process, answers(f"{url}/healthz"))
    for process in others:
        cluster.wait_ready(process, worker_ready)
    return cluster


def start_receiver(cluster: Cluster, stack: ExitStack) -> webhook_receiver.Receiver:
    receiver = webhook_receiver.start(cluster.net.address)
    stack.callback(receiver.server_close)
    stack.callback(receiver.shutdown)
    with cluster.client() as client:
        receiver.secrets = [client.get("/webhooks/secret").json()["secret"]]
    return receiver
