"""The launcher's private CUDA MPS daemon: when it is used, what engines get, and its start and stop.

There is no GPU here: a stand-in `nvidia-cuda-mps-control` on PATH answers the commands the real one takes
(`-d`, then one command per call on stdin) and records what it was asked, with which environment.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli.engine import engine as engine_command
from worker.engines import launcher as engine_launcher
from worker.engines import mps, profiles
from worker.engines.profiles import get_profile

FAKE_CONTROL = r"""#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
pipe = Path(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
running = pipe / "control.running"
with open(os.environ["FAKE_MPS_LOG"], "a") as log:
    if sys.argv[1:] == ["-d"]:
        if os.environ.get("FAKE_MPS_BROKEN"):
            sys.exit("cannot start")
        log.write(json.dumps({"cmd": "-d", "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                              "logdir": os.environ.get("CUDA_MPS_LOG_DIRECTORY")}) + "\n")
        running.touch()
        sys.exit(0)
    if not running.exists():
        sys.exit("Cannot find MPS control daemon process")
    command = sys.stdin.read().strip()
    log.write(json.dumps({"cmd": command}) + "\n")
    answers = {"get_default_active_thread_percentage": "100.0", "get_server_list": "4242",
               "get_client_list 4242": "311\n312"}
    if command == "quit":
        running.unlink()
    print(answers.get(command, ""))
"""


@pytest.fixture
def fake_control(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    control = bin_dir / mps.CONTROL
    control.write_text(FAKE_CONTROL)
    control.chmod(control.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "control.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MPS_LOG", str(log))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")

    def commands() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return commands


LANES = ("bulk", "interactive")


def test_mps_is_used_where_interactive_shares_a_card_with_bulk_and_only_if_it_exists(fake_control, monkeypatch):
    assert mps.wanted("auto", lanes=LANES)
    assert not mps.wanted("auto", lanes=("bulk", "bulk"))
    assert not mps.wanted("off", lanes=LANES)
    assert mps.wanted("on", lanes=("bulk",))
    with pytest.raises(ValueError):
        mps.wanted("sometimes", lanes=LANES)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not mps.wanted("auto", lanes=LANES)
    with pytest.raises(mps.MpsError, match="not on PATH"):
        mps.wanted("on", lanes=LANES)


def test_the_daemon_starts_before_the_engines_and_quits_after(fake_control, tmp_path):
    directory = tmp_path / "state" / "mps"
    with mps.serving("auto", lanes=LANES, directory=directory) as daemon:
        assert daemon is not None and daemon.running()
        assert daemon.clients() == [311, 312]
        assert daemon.env == {"CUDA_MPS_PIPE_DIRECTORY": str(directory / "pipe"),
                              "CUDA_MPS_LOG_DIRECTORY": str(directory / "log")}
    assert not daemon.running()
    commands = fake_control()
    start = commands[0]
    assert start["cmd"] == "-d"
    # The server must see every card; each engine picks its own with CUDA_VISIBLE_DEVICES.
    assert start["visible"] is None and start["logdir"] == str(directory / "log")
    assert commands[-1]["cmd"] == "quit"


def test_a_daemon_left_by_a_killed_launcher_is_replaced(fake_control, tmp_path):
    left = mps.MpsDaemon(tmp_path / "mps")
    left.start()
    with mps.serving("on", lanes=LANES, directory=tmp_path / "mps") as daemon:
        assert daemon is not None and daemon.running()
    assert [c["cmd"] for c in fake_control() if c["cmd"] in ("-d", "quit")] == ["-d", "quit", "-d", "quit"]


def test_auto_falls_back_to_time_slicing_when_the_daemon_will_not_start(fake_control, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_BROKEN", "1")
    with mps.serving("auto", lanes=LANES, directory=tmp_path / "mps") as daemon:
        assert daemon is None
    with pytest.raises(mps.MpsError, match="did not start"), \
            mps.serving("on", lanes=LANES, directory=tmp_path / "mps"):
        pass


def test_engines_of_a_card_become_clients_and_bulk_leaves_sms_to_interactive(tmp_path):
    daemon = mps.MpsDaemon(tmp_path / "mps")
    gpus = [{"index": "0", "memory_gib": 140.0}]

    def plan(**kwargs):
        return engine_launcher.plan_vllm(profile=get_profile("h200"), gpus=gpus, state_dir=tmp_path, **kwargs)

    bulk, interactive = plan(lanes=LANES, share_weights=True, mps=daemon)
    for spec in (bulk, interactive):
        assert spec.env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "mps" / "pipe")
    assert bulk.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == str(profiles.INTERACTIVE_BULK_SM_PERCENT)
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in interactive.env
    assert plan(lanes=LANES, mps=daemon, bulk_sm_percent=70)[0].env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "70"
    # Bulk engines alone on a card are not held back; without MPS nothing of it reaches the engines.
    assert not any("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" in s.env for s in plan(engines_per_gpu=2, mps=daemon))
    assert not any(k.startswith("CUDA_MPS") for s in plan(lanes=LANES, bulk_sm_percent=70) for k in s.env)
    with pytest.raises(ValueError, match="1..100"):
        plan(lanes=LANES, mps=daemon, bulk_sm_percent=0)


def test_cli_dry_run_shows_the_mps_environment(fake_control, tmp_path):
    app = typer.Typer()
    app.command()(engine_command)
    runner = CliRunner()
    args = ["--dry-run", "--gpus", "0", "--lanes", "bulk,interactive", "--state-dir", str(tmp_path)]
    shown = runner.invoke(app, [*args, "--bulk-sm-percent", "80"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.strip().splitlines()
    assert len(lines) == 2
    assert all(f"CUDA_MPS_PIPE_DIRECTORY={tmp_path / 'mps' / 'pipe'}" in line for line in lines)
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=80" in lines[0] and "ACTIVE_THREAD" not in lines[1]
    off = runner.invoke(app, [*args, "--mps", "off"])
    assert off.exit_code == 0 and "CUDA_MPS" not in off.output
    assert not Path(tmp_path / "mps").exists(), "a dry run started a daemon"


def test_once_ready_the_launcher_reports_engines_missing_from_the_daemon(fake_control, tmp_path, caplog):
    specs = engine_launcher.plan_cpu(lanes=("bulk", "interactive", "bulk"))
    seen = []
    with mps.serving("on", lanes=LANES, directory=tmp_path / "mps") as daemon, \
            caplog.at_level("INFO", logger="ocrq.engine"):
        engine_launcher._ready_under_mps(daemon, specs, ["u"], on_ready=seen.append)
    assert seen == [["u"]]
    # Two clients for three engines: one of them runs time-sliced beside the others.
    assert any(r.levelname == "WARNING" and "2 client process(es) for 3 engine(s)" in r.message for r in caplog.records)
