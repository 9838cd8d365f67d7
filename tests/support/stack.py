"""Running ocrq for tests: the API in-process (TestClient) and workers as real subprocesses."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"succeeded", "failed", "canceled"}


def settings_env(settings: Settings) -> dict[str, str]:
    """OCRQ_* variables that reproduce `settings` in a child process."""
    env = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = json.dumps(value)
        env[f"OCRQ_{name.upper()}"] = str(value)
    return env


class Worker:
    def __init__(self, process: subprocess.Popen, log: Path) -> None:
        self.process, self.log = process, log

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


class Stack:
    def __init__(self, settings: Settings, *, logs: Path) -> None:
        self.settings, self.logs = settings, logs
        self.workers: list[Worker] = []
        self._app = create_app(settings)
        self._client: TestClient | None = None

    def __enter__(self) -> Stack:
        self._client = TestClient(self._app)
        self._client.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for worker in self.workers:
            worker.stop()
        self._client.__exit__(*exc)

    @property
    def services(self):
        return self._app.state.services

    def client(self, key: str | None) -> TestClient:
        client = TestClient(self._app)
        client.headers.update({"Authorization": f"Bearer {key}"} if key else {})
        return client

    def start_worker(self, *args: str, extra_env: dict[str, str] | None = None, timeout: float = 90,
                     module: str = "cli.main") -> Worker:
        """Start `ocrq worker` and wait until it has loaded its engine and listens."""
        log = self.logs / f"worker-{len(self.workers)}.log"
        if "--beat" not in args:  # tests choose which worker runs the sweepers' schedule
            args = ("--no-beat", *args)
        env = os.environ.copy() | settings_env(self.settings) | (extra_env or {})
        process = subprocess.Popen([sys.executable, "-m", module, "worker", *args], cwd=ROOT, env=env,
                                   stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        worker = Worker(process, log)
        self.workers.append(worker)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"worker exited:\n{log.read_text()[-3000:]}")
            if b" ready." in log.read_bytes():
                return worker
            time.sleep(0.2)
        worker.kill()
        raise RuntimeError(f"worker not ready in {timeout}s:\n{log.read_text()[-3000:]}")


def children(pid: int) -> list[int]:
    """The pids of a process's children (a worker's pool children), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # a thread that ended meanwhile
            continue
    return found


def wait_for_job(client: TestClient, job_id: str, *, timeout: float = 120, until=TERMINAL) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/jobs/{job_id}").json()
        if body["status"] in until:
            return body
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {body['status']} after {timeout}s: {body}")


def wait_until(check, *, timeout: float, what: str, every: float = 0.3):
    """The first truthy value of check(), polled until `timeout`; fails saying `what` never happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(every)
    raise AssertionError(f"{what} not within {timeout}s")


def beat_period(settings: Settings, entry: str) -> float:
    """How often the beat schedule runs `entry` (e.g. "sweep-webhooks") with these settings, in seconds."""
    from common.queue.config import build_config

    return float(build_config(settings)["beat_schedule"][entry]["schedule"])


def task_results(worker: Worker, task: str) -> list[str]:
    """The return value of each run of `task` that succeeded in this worker, oldest first, as its log shows it
    (Celery's "Task <name>[<id>] succeeded in <s>s: <value>" line, in the text log format)."""
    line = re.compile(rf"Task {re.escape(task)}\[[0-9a-f-]+\] succeeded in \S+s: (\S+)")
    return line.findall(worker.log.read_text(errors="replace"))


def wait_for_task_runs(worker: Worker, task: str, *, after: int, timeout: float) -> list[str]:
    """The results of the runs of `task` past the first `after`, once there is at least one."""
    return wait_until(lambda: task_results(worker, task)[after:], timeout=timeout,
                      what=f"a run of {task} in {worker.log.name}")
