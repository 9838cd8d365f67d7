"""Wall time and CPU seconds of each of `ocrq serve`'s processes while it reads bench/embedded.py's pages, for
the tree at DIR (this one, or another unpacked with `git archive REF | tar -x -C DIR`) on this .venv.

    .venv/bin/python bench/stack_cpu.py DIR 9
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.embedded import make_pages, through_stack  # noqa: E402
from tests.support.embedded import EmbeddedServer  # noqa: E402


def cpu_by_process() -> dict[int, tuple[float, str]]:
    """Every process's CPU seconds (user + system) and command line, from /proc."""
    rows = {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            args = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        rows[int(d.name)] = ((int(fields[11]) + int(fields[12])) / tick, args[:90])
    return rows


def main() -> None:
    root, pages = Path(sys.argv[1]).resolve(), int(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        uploads = make_pages(folder, pages)
        with EmbeddedServer(folder / "home", root=root) as server:
            headers = {"Authorization": f"Bearer {server.key}"}
            client = httpx.Client(base_url=server.url, headers=headers, timeout=60)
            through_stack(client, uploads[:1])
            before = cpu_by_process()
            seconds = through_stack(client, uploads)
            after = cpu_by_process()
            print(f"{root}: {seconds:.1f} s for {pages} pages")
            for pid, (cpu, args) in after.items():
                if "cli.main" in args:
                    spent = cpu - before.get(pid, (0.0, ""))[0]
                    if spent:
                        print(f"  {pid} +{spent:.2f} CPU-s  {args}")


if __name__ == "__main__":
    main()
