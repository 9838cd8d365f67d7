"""Every shell example in README.md and the docs/ pages, run as written against `ocrq serve`, or skipped here for a
stated reason.

An example is a ```sh block; it belongs to the nearest heading above it (any level), and that heading is named in
RUN or in ELSEWHERE below.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.support.embedded import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Run in this order, one bash script: later sections use the KEY, URL and JOB set by earlier ones.
RUN = ("Upload a document, read its text", "Using it", "Your jobs: lists, pages as they finish, live events, erase",
       "Erase a job", "Convert a file through docling's routes", "Try it", "Read a page through MCP",
       "Use it from Python")
# Sections whose examples cannot run on this machine, and what tests them instead.
ELSEWHERE = {
    "ocrq": "the two commands again, as under the next heading",
    "Two commands on a fresh machine": "they are how this suite and the server under test are started",
    "Production: docker compose": "no Docker engine here; tests/deploy/test_compose.py validates the file",
    "GPU engines (vLLM)": "needs a GPU; tests/engines/test_engine_profiles.py checks the flags",
    "Several engines on one GPU, one copy of the weights": "needs a GPU",
    "Priority lanes": "needs vLLM engines; tests/queue/test_priority_lanes.py runs the lanes on the CPU",
    "Bulk S3 ingestion": "needs S3 buckets; tests/batches run the same requests against SeaweedFS",
    "Searchable PDF": "needs a finished job's id; tests/cli/test_embedded.py runs `ocrq result --format pdf` "
                      "against ocrq serve, and tests/jobs/test_pdf_results.py the API",
    "Security model": "a grant written in settings; tests/tenancy/test_s3_grants.py runs grants of that shape",
    "Compose, one file per role": "no Docker engine here; tests/deploy/test_many_hosts_compose.py validates it",
    "Kubernetes": "no cluster here; tests/deploy/test_k8s.py builds and validates every overlay",
    "Tables as data": "needs a finished job's id; tests/formats/test_tables_served.py reads CSV, JSON and "
                      "`ocrq result --format xlsx` from ocrq serve",
    "Layout formats: hOCR, ALTO, PAGE XML": "needs a finished job's id; tests/formats/test_confidence.py fetches "
                                            "the same formats through the API",
}


def shell_blocks() -> list[tuple[str, str]]:
    """(heading, code) for every ```sh block of PAGES, under the nearest heading outside a code block."""
    blocks = []
    for page in PAGES:
        heading, code, fence = "", None, None
        for line in page.read_text().splitlines(keepends=True):
            stripped = line.strip()
            if fence is None and stripped.startswith("```"):
                fence = line[:len(line) - len(line.lstrip())]
                code = [] if stripped == "```sh" else None
            elif fence is not None and stripped == "```":
                if code is not None:
                    blocks.append((heading, "".join(code)))
                fence = code = None
            elif fence is not None:
                if code is not None:
                    code.append(line.removeprefix(fence))
            elif match := re.match(r"^#{1,6} (.+)$", line):
                heading = match.group(1).strip()
    return blocks


def test_every_shell_example_is_run_here_or_tested_elsewhere():
    headings = {heading for heading, _ in shell_blocks()}
    assert headings, "no ```sh blocks found in README.md or docs/"
    assert headings <= set(RUN) | set(ELSEWHERE), headings - set(RUN) - set(ELSEWHERE)
    assert set(RUN) <= headings


def test_the_using_it_examples_work_as_written(embedded_server, tmp_path):
    """A new user's shell: HOME whose ~/.ocrq is the server's, at the top of a clone, bash -e."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".ocrq").symlink_to(embedded_server.home)
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("run", "tests"):
        (clone / name).symlink_to(ROOT / name)
    (clone / ".venv").symlink_to(Path(sys.executable).parents[1])
    blocks = shell_blocks()
    script = "\n".join(code for section in RUN for heading, code in blocks if heading == section)
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    out = done.stdout
    assert '"status":"queued"' in out
    assert '"status":"succeeded"' in out and '"pages_total":2' in out and '"pages_done":2' in out
    assert "LinnSequencer" in out  # page 2 of three-pages.pdf, in the text result and in submit's output
    assert sorted(p.name for p in (clone / "results").iterdir()) == ["linn.png.md", "typewriter.png.md"]
    assert "LinnSequencer" in (clone / "results" / "linn.png.md").read_text()
    assert "wrote 2 of 2 result(s) to results/" in done.stderr
    assert "event: job.succeeded" in out and '"code":"erased"' in out and '"next":' in out
    # docs/api/docling.md, open-webui.md and mcp.md: docling's shape, the SSRF guard, Open WebUI's, the MCP tools.
    converted = json.loads((clone / "converted.json").read_text())
    assert converted["status"] == "success" and "LinnSequencer" in converted["document"]["md_content"]
    assert "LinnSequencer" in converted["document"]["text_content"] and '"code":"url_refused"' in out
    assert '"page_content":' in out and '"source":"typewriter.png"' in out
    assert "['list_jobs', 'result', 'submit', 'wait']" in out and "succeeded <!-- page 1 -->" in out
    # docs/client.md: the Python client against ocrq serve, its live events, and the API's own JobView.
    assert "client events ['page.done', 'job.succeeded']" in out and "client succeeded 1 True" in out
