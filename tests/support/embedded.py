"""`ocrq serve` as a subprocess on the embedded default, for end-to-end tests and benchmarks."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.http import loopback
from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
READY_LINE = b"ocrq is ready at "


class EmbeddedServer:
    """Starts `ocrq serve` with a fresh OCRQ_HOME and nothing else configured."""

    def __init__(self, home: Path, *, extra_env: dict[str, str] | None = None, root: Path = ROOT) -> None:
        self.home, self.port, self.root = home, free_port(), root
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("OCRQ_")}
        self.env = env | {"OCRQ_HOME": str(home)} | (extra_env or {})
        self.log = home.parent / f"{home.name}-serve.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> EmbeddedServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(self.port)], cwd=self.root, env=self.env,
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            self.wait_ready()
        except BaseException:
            self.__exit__()  # a server that never got ready would outlive the run, restarting its workers
            raise
        return self

    def summary(self) -> list[str]:
        """The start-up summary's lines, from its first line to the end of the log."""
        text = self.log.read_text()
        return text[text.rindex(READY_LINE.decode()):].splitlines()

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ocrq serve exited:\n{self.log.read_text()[-3000:]}")
            try:
                up = loopback().get(f"{self.url}/healthz", timeout=1).status_code == 200
                # The start-up summary comes once the API listens and its workers are ready.
                if up and READY_LINE in self.log.read_bytes():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"ocrq serve not ready in {timeout}s:\n{self.log.read_text()[-3000:]}")

    @property
    def key(self) -> str:
        return (self.home / "api_key").read_text().strip()

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)

    def descendants(self) -> list[int]:
        """Every process below `ocrq serve`: its workers, their pool children and beat."""
        from tests.support.stack import children

        found, todo = [], [self.process.pid]
        while todo:
            for child in children(todo.pop()):
                found.append(child)
                todo.append(child)
        return found

    def wait_for_a_page_being_read(self, timeout: float = 60) -> None:
        """Until a worker has claimed a page and not yet written it."""
        deadline = time.monotonic() + timeout
        with sqlite3.connect(self.home / "ocrq.db") as db:
            while not db.execute("select count(*) from pages where status = 'running'").fetchone()[0]:
                assert time.monotonic() < deadline, "no page was being read"
                time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
