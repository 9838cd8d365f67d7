"""The launcher's CPU priority: its engines run at the nice asked for, or at the old one with a warning when the
host refuses. Each case runs in its own interpreter, so the test process keeps its priority."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Takes the priority, then starts an engine from a thread started after it (as the supervisor restarts one), and
# reports the nice the engine process was born with (/proc/PID/stat, field 19).
PROBE = r"""
import json, logging, os, sys, threading
from worker.engines import launcher
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
want, drop_to = int(sys.argv[1]), int(sys.argv[2])
if drop_to >= 0:
    os.setuid(drop_to)
ran_at = launcher.take_cpu_priority(want)
spec = launcher.EngineSpec(name="sleeper", argv=["sleep", "30"], env={}, url="http://127.0.0.1:9",
                           served_model_name="m")
box = {}
thread = threading.Thread(target=lambda: box.update(engine=launcher.start(spec)))
thread.start()
thread.join()
engine = box["engine"]
with open(f"/proc/{engine.process.pid}/stat") as stat:
    child = int(stat.read().rsplit(")", 1)[1].split()[16])
launcher.stop_engine(engine, grace_s=5)
print(json.dumps({"ran_at": ran_at, "child": child, "own": os.getpriority(os.PRIO_PROCESS, 0)}))
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


def probe(want: int, *, drop_to: int = -1) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(want), str(drop_to)], check=False, cwd=ROOT, capture_output=True,
        text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_engines_start_at_the_priority_asked_for():
    start = os.getpriority(os.PRIO_PROCESS, 0)
    want = min(19, start + 5)
    seen, _ = probe(want)
    assert seen == {"ran_at": want, "child": want, "own": want}


def test_a_refused_priority_leaves_the_engines_as_they_were_and_says_why():
    if os.geteuid() == 0:  # root may raise priority: the probe gives it up first, as an engine host without it
        seen, log = probe(-5, drop_to=65534)
    else:
        seen, log = probe(min(19, os.getpriority(os.PRIO_PROCESS, 0)) - 1)
    assert seen["ran_at"] == seen["child"] == seen["own"]
    assert "needs root or CAP_SYS_NICE" in log
