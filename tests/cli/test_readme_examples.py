"""Every shell example in README.md, run as written against `ocrq serve`, or skipped here for a stated reason."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.embedded import ROOT

README = ROOT / "README.md"
RUN = {"Using it", "Your jobs: lists, pages as they finish, live events, erase"}
# Sections whose examples cannot run on this machine, and what tests them instead.
ELSEWHERE = {
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
    "Layout formats: hOCR, ALTO, PAGE XML": "needs a finished job's id; tests/formats/test_confidence.py fetches "
                                            "the same formats through the API",
}


def shell_blocks() -> list[tuple[str, str]]:
    """(heading, code) for every ```sh block, under the nearest ## or ### heading."""
    blocks, heading = [], ""
    for part in re.split(r"^(```sh\n.*?^```)$", README.read_text(), flags=re.DOTALL | re.MULTILINE):
        if part.startswith("```sh"):
            blocks.append((heading, part.removeprefix("```sh\n").removesuffix("```")))
        elif titles := re.findall(r"^#{2,3} (.+)$", part, flags=re.MULTILINE):
            heading = titles[-1].strip()
    return blocks


def test_every_shell_example_is_run_here_or_tested_elsewhere():
    headings = {heading for heading, _ in shell_blocks()}
    assert headings, "no ```sh blocks found in README.md"
    assert headings <= RUN | set(ELSEWHERE), headings - RUN - set(ELSEWHERE)
    assert RUN <= headings


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
    script = "\n".join(code for heading, code in shell_blocks() if heading in RUN)
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
