"""`ocrq jobs`, `ocrq watch` and `ocrq erase` against the shared `ocrq serve` on the embedded default (SQLite, a
local folder, the filesystem broker): the list, the live events and the erase work there as on Postgres."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx

from tests.batches.support import word_image
from tests.support.embedded import ROOT


def ocrq(server, *args: str) -> subprocess.CompletedProcess:
    env = {"OCRQ_HOME": str(server.home), "PATH": "/usr/bin:/bin", "OCRQ_URL": server.url}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def test_list_watch_and_erase_on_the_embedded_default(embedded_server):
    headers = {"Authorization": f"Bearer {embedded_server.key}"}
    job_id = httpx.post(f"{embedded_server.url}/jobs", headers=headers,
                        files={"file": ("watched.png", word_image("watched"))}).json()["id"]
    watched = ocrq(embedded_server, "watch", job_id)
    assert watched.returncode == 0 and watched.stdout.strip() == f"{job_id} succeeded", watched.stderr
    assert "1/1" in watched.stderr  # the bar reached the page count

    listed = json.loads(ocrq(embedded_server, "jobs", "--json", "--limit", "5").stdout)
    assert listed["jobs"][0]["id"] == job_id and listed["jobs"][0]["filename"] == "watched.png"
    table = ocrq(embedded_server, "jobs", "--status", "succeeded")
    assert table.returncode == 0 and job_id in table.stdout and "watched.png" in table.stdout

    erased = ocrq(embedded_server, "erase", job_id)
    assert erased.returncode == 0 and erased.stdout.strip() == f"{job_id} erased", erased.stderr
    assert not list((embedded_server.home).rglob(f"*{job_id}*/source"))
    gone = httpx.get(f"{embedded_server.url}/jobs/{job_id}/result", headers=headers)
    assert (gone.status_code, gone.json()["code"]) == (410, "erased")
    assert "(erased)" in ocrq(embedded_server, "jobs").stdout
    missing = ocrq(embedded_server, "erase", "0" * 32)
    assert missing.returncode == 2 and "404" in missing.stderr
