"""The worker's metrics folder is chosen before prometheus_client is imported, so its metrics go to files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common.settings import Settings
from worker.metrics_dir import prepare_multiprocess

ROOT = Path(__file__).resolve().parents[2]

# What `ocrq worker` does: the folder first, then the worker's modules (and prometheus_client with them).
SCRIPT = """
import json, os, sys
from common.settings import Settings
from worker.metrics_dir import prepare_multiprocess
folder = prepare_multiprocess(Settings(_env_file=None, metrics_dir=sys.argv[1]))
from worker.metrics import WorkerMetrics
WorkerMetrics().page_done("succeeded")
print(json.dumps({"folder": str(folder), "files": sorted(os.listdir(folder))}))
"""


def test_metrics_of_a_worker_process_are_written_to_its_folder(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(got["folder"]).parent == tmp_path
    assert any(name.startswith("counter_") for name in got["files"])


def test_choosing_the_folder_after_prometheus_client_was_imported_is_refused(tmp_path):
    import prometheus_client  # noqa: F401  (the test process has it already; a late choice would be ignored)

    with pytest.raises(RuntimeError, match="imported before"):
        prepare_multiprocess(Settings(_env_file=None, metrics_dir=tmp_path))
    assert list(tmp_path.iterdir()) == []
