"""The hostile and awkward files of tests/documents/hostile.py through `ocrq serve` (embedded default, CPU engine),
beside the tool a user would pick instead: pdftotext for PDFs, Tesseract (`OMP_THREAD_LIMIT=1`, `-l eng`) for
images. For each: what ocrq answered (the upload's HTTP status, else the job's status and its first page's reason),
what the peer did (its exit status and first line of complaint), and the seconds each took.

    .venv/bin/python bench/hostile_files.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.embedded import wait  # noqa: E402
from tests.documents import hostile  # noqa: E402
from tests.support.embedded import EmbeddedServer  # noqa: E402

FILES = {
    "invalid.pdf": hostile.invalid_pdf, "zero-pages.pdf": hostile.zero_page_pdf,
    "encrypted.pdf": hostile.encrypted_pdf, "owner-encrypted.pdf": hostile.owner_encrypted_pdf,
    "35000px-mono.pdf": hostile.huge_mono_pdf, "wide-page.pdf": hostile.wide_page_pdf,
    "thin-page.pdf": hostile.thin_page_pdf, "png-named.pdf": hostile.png_named_pdf,
    "bomb.png": hostile.png_bomb, "truncated.jpg": hostile.truncated_jpeg, "truncated.png": hostile.truncated_png,
    "cmyk.jpg": hostile.cmyk_jpeg, "palette-alpha.png": hostile.palette_transparent_png, "rgba.png": hostile.rgba_png,
    "gray16.png": hostile.gray16_png, "exif-rotated.jpg": hostile.exif_rotated_jpeg,
    "three-pages.tiff": hostile.multipage_tiff, "empty.png": hostile.empty_file,
}
PEER_TIMEOUT_S = 120


def ocrq(client: httpx.Client, path: Path) -> tuple[str, float]:
    started = time.perf_counter()
    answer = client.post("/jobs", files={"file": (path.name, path.read_bytes())})
    if answer.status_code != 202:
        body = answer.json()
        return f"{answer.status_code} {body.get('code')}: {body.get('detail')}", time.perf_counter() - started
    job_id = answer.json()["id"]
    job = wait(client, [job_id], interval=0.2)[0]
    pages = client.get(f"/jobs/{job_id}/pages").json()
    errors = [p["error"] for p in pages["pages"] if p.get("error")]
    reason = f": {errors[0]}" if errors else (f": {job['error']}" if job.get("error") else "")
    words = len(client.get(f"/jobs/{job_id}/result", params={"format": "text"}).text.split()) \
        if job["status"] == "succeeded" else 0
    return f"{job['status']}, {job['pages_total']} pages, {words} words{reason}", time.perf_counter() - started


def peer(path: Path) -> tuple[str, float]:
    if path.suffix == ".pdf":
        command = ["pdftotext", str(path), "-"]
    else:
        command = ["tesseract", str(path), "-", "-l", "eng"]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PEER_TIMEOUT_S,
                              env=os.environ | {"OMP_THREAD_LIMIT": "1"})
    except subprocess.TimeoutExpired:
        return f"killed after {PEER_TIMEOUT_S} s", time.perf_counter() - started
    complaint = next((ln for ln in done.stderr.splitlines() if ln.strip()), "")
    words = len(done.stdout.split())
    return f"exit {done.returncode}, {words} words{': ' + complaint[:80] if complaint else ''}", \
        time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, EmbeddedServer(Path(tmp) / "home") as server:
        folder = Path(tmp)
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=120)
        print("| file | ocrq | ocrq s | peer | peer | peer s |")
        print("|---|---|---|---|---|---|")
        for name, make in FILES.items():
            path = make(folder / name)
            answer, ours = ocrq(client, path)
            result, theirs = peer(path)
            tool = "pdftotext" if path.suffix == ".pdf" else "tesseract"
            print(f"| {name} | {answer.replace('|', '/')} | {ours:.2f} | {tool} | {result.replace('|', '/')} | "
                  f"{theirs:.2f} |", flush=True)
        alive = client.get("/healthz").status_code
        print(f"\nocrq serve after the files: /healthz {alive}")


if __name__ == "__main__":
    main()
