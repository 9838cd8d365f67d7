"""The embedded default end to end: `ocrq serve`, then `ocrq submit --wait`, with no server on the machine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from cli.serve import startup_summary, worker_plan
from common.settings import Settings
from tests.support import webhook_receiver
from tests.support.embedded import ROOT, EmbeddedServer, alive
from tests.support.pdf_checks import poppler_text
from tests.support.stack import children
from tests.support.text import word_recall


def test_serve_then_submit_and_poll(tmp_path, samples):
    home = tmp_path / "home"
    receiver = webhook_receiver.start()
    with EmbeddedServer(home, extra_env={"OCRQ_NET_ALLOWLIST": "127.0.0.1/32"}) as server:
        summary = server.summary()
        assert summary[0] == f"ocrq is ready at {server.url}   (web page {server.url}/ , API docs {server.url}/docs)"
        assert summary[1:3] == [f"Your API key, shown this once, saved in {home / 'api_key'}:", f"  {server.key}"]
        assert summary[3] == "Try:" and summary[4] == "  ./run ocrq submit tests/samples/linn.png --wait"
        assert summary[5].startswith("  curl -s -H") and summary[5].endswith(f"{server.url}/jobs")
        assert (home / "url").read_text().strip() == server.url
        headers = {"Authorization": f"Bearer {server.key}"}
        assert (home / "ocrq.db").exists() and (home / "storage").is_dir()

        with (samples / "linn.png").open("rb") as body:
            response = httpx.post(f"{server.url}/jobs", headers=headers, files={"file": ("linn.png", body)},
                                  data={"webhook_url": receiver.url + "/hook"})
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        deadline = time.monotonic() + 120
        while (job := httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json())["status"] not in (
                "succeeded", "failed") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert job["status"] == "succeeded", job
        text = httpx.get(f"{server.url}/jobs/{job_id}/result", headers=headers).text
        assert word_recall((samples / "linn.txt").read_text(), text) > 0.9

        readyz = httpx.get(f"{server.url}/readyz").json()
        assert readyz["checks"] == {"database": "ok", "broker": "ok", "storage": "ok", "engine": "ok"}
        # The event's links point at the port `ocrq serve` runs on, with no OCRQ_PUBLIC_URL given.
        event = json.loads(receiver.wait_for("/hook", 1, timeout=60)[0].body)
        assert event["data"]["links"]["self"] == f"{server.url}/jobs/{job_id}"

        # No --url and no OCRQ_URL: the CLI finds the URL that `ocrq serve` recorded in OCRQ_HOME.
        cli = subprocess.run(
            [sys.executable, "-m", "cli.main", "submit", str(samples / "typewriter.png"), "--wait",
             "--output", "text"],
            cwd=ROOT, env=server.env, capture_output=True, text=True, timeout=180,
        )
        assert cli.returncode == 0, cli.stderr
        assert len(cli.stdout.split()) > 20
        assert "pages" in cli.stderr  # the progress bar
        pdf = tmp_path / "linn.pdf"
        cli = subprocess.run([sys.executable, "-m", "cli.main", "result", job_id, "--format", "pdf", "--out", str(pdf)],
                             check=False, cwd=ROOT, env=server.env | {"OCRQ_URL": server.url}, capture_output=True,
                             timeout=120)
        assert cli.returncode == 0, cli.stderr
        assert pdf.read_bytes().startswith(b"%PDF-") and "LinnSequencer" in poppler_text(pdf)

        # The console: start-up steps, the summary, one line per ended job; the rest is in the log file.
        console = server.log.read_text()
        assert console.startswith(f"logs: {home / 'logs'} (-v shows them here too)\ndatabase: up to date\n")
        assert re.search(rf"^job finished  {job_id}  linn\.png  1 page  [0-9.]+ s  succeeded$", console, re.M)
        assert "celery" not in console and "kombu" not in console.lower() and "Warning" not in console
        log_file = (home / "logs" / "ocrq.log").read_text()
        assert " ready." in log_file and f"job finished  {job_id}" in log_file and server.key not in log_file

        # Stopped while a page is being read: gone within 10 s, and no worker outlives it.
        with (samples / "typewriter.png").open("rb") as body:
            httpx.post(f"{server.url}/jobs", headers=headers, files={"file": ("typewriter.png", body)})
        server.wait_for_a_page_being_read()
        below = server.descendants()
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=10)
        assert time.monotonic() - started < 10 and not [pid for pid in below if alive(pid)]
    receiver.shutdown()


def test_cli_reports_an_unreachable_server_and_a_wrong_key(tmp_path, samples, embedded_server):
    env = {"OCRQ_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-m", "cli.main", "submit", str(samples / "linn.png")]
    gone = subprocess.run(args + ["--url", "http://127.0.0.1:9"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert gone.returncode == 2 and "cannot reach ocrq" in gone.stderr
    # The shared server: a refused key changes nothing there.
    wrong = subprocess.run(args + ["--url", embedded_server.url, "--key", "ocrq_wrong"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "API key was refused" in wrong.stderr


def test_a_restart_says_where_the_key_is(tmp_path):
    key_path = tmp_path / "api_key"
    key_path.write_text("ocrq_x\n")
    lines = startup_summary(url="http://127.0.0.1:8790", key=None, key_path=key_path, auth_disabled=False)
    lines = lines.strip().splitlines()
    assert lines[0].startswith("ocrq is ready at http://127.0.0.1:8790 ")
    assert lines[1] == f"Your API key is in {key_path}" and "ocrq_x" not in "".join(lines)
    assert lines[-2].endswith(" submit tests/samples/linn.png --wait")
    assert f'-H "Authorization: Bearer $(cat {key_path})" -F file=@' in lines[-1]
    assert lines[-1].endswith(" http://127.0.0.1:8790/jobs")


def test_a_worker_that_dies_is_started_again_and_jobs_still_finish(tmp_path, samples):
    with EmbeddedServer(tmp_path / "home") as server:
        headers = {"Authorization": f"Bearer {server.key}"}
        pages_worker = next(pid for pid in children(server.process.pid)
                            if b"--beat" in Path(f"/proc/{pid}/cmdline").read_bytes())
        os.killpg(pages_worker, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while b"worker worker exited with -9" not in server.log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert b"worker worker exited with -9" in server.log.read_bytes()

        with (samples / "typewriter.png").open("rb") as body:
            job_id = httpx.post(f"{server.url}/jobs", headers=headers,
                                files={"file": ("typewriter.png", body)}).json()["id"]
        deadline = time.monotonic() + 120
        while (job := httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json())["status"] not in (
                "succeeded", "failed") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert job["status"] == "succeeded", job
        assert pages_worker not in children(server.process.pid)

        # `ocrq serve` SIGKILLed while a page is being read: its workers end on their own.
        with (samples / "typewriter.png").open("rb") as body:
            httpx.post(f"{server.url}/jobs", headers=headers, files={"file": ("typewriter.png", body)})
        server.wait_for_a_page_being_read()
        below = server.descendants()
        server.process.kill()
        deadline = time.monotonic() + 15
        while [pid for pid in below if alive(pid)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in below if alive(pid)]


def test_serve_runs_one_page_worker_per_core(tmp_path):
    plan = worker_plan(Settings(home=tmp_path), cores=2)
    assert list(plan) == ["worker", "worker-2", "webhooks"]
    assert [plan[name]["beat"] for name in plan] == [True, False, False]  # one sweeper schedule
    assert plan["webhooks"] == {"beat": False, "queues": "ocrq.webhooks"}
    assert list(worker_plan(Settings(home=tmp_path, serve_page_workers=1), cores=2)) == ["worker", "webhooks"]
    assert len(worker_plan(Settings(home=tmp_path), cores=32)) == 5  # four page workers: memory, not cores
    assert len(worker_plan(Settings(home=tmp_path, serve_page_workers=8), cores=32)) == 9


def test_a_worker_that_dies_before_it_is_ready_has_its_successor_say_ready(monkeypatch):
    """A page worker that died at start (two starting together once broke the broker's table) was started again
    without its ready signal, and the start-up summary never came."""
    import cli.serve

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ready = {"worker-2": threading.Event()}
    started = []

    def start_worker(name, *, beat, queues=None, ready=None):
        started.append((name, ready))
        ready.set()  # the successor says it is ready
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])

    monkeypatch.setattr(cli.serve, "start_worker", start_worker)
    monkeypatch.setattr(cli.serve, "QUICK_DEATH_S", 0.0)
    stop = threading.Event()
    workers = {"worker-2": dead}
    watcher = threading.Thread(target=cli.serve.keep_alive, args=(workers, {"worker-2": {"beat": False}}, stop),
                               kwargs={"ready": ready, "every_s": 0.05})
    watcher.start()
    try:
        assert ready["worker-2"].wait(10)
    finally:
        stop.set()
        watcher.join(5)
        workers["worker-2"].kill()
    assert started == [("worker-2", ready["worker-2"])]
