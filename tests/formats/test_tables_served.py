"""Tables end to end on the embedded default: a two-page PDF whose ruled table runs over the page break, read by
the CPU engine, out as CSV and JSON from the API and as XLSX from `ocrq result --format xlsx --out`, read back by
the csv module and openpyxl."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time

import httpx
from openpyxl import load_workbook

from tests.support.embedded import ROOT
from tests.support.table_pages import INVOICE, draw_table

MORE = [["Oak pegs", "200", "0.35", "70.00"], ["Tar", "4", "19.90", "79.60"]]


def _pdf(tmp_path):
    first, truth = draw_table(INVOICE, page=(1240, 1000), at=(80, 640))
    second, _ = draw_table(MORE, header=False, title=None, page=(1240, 1000), at=(80, 100), widths=truth.widths)
    path = tmp_path / "invoice.pdf"
    first.save(path, save_all=True, append_images=[second], resolution=150)
    return path


def test_a_table_over_a_page_break_comes_out_as_csv_xlsx_and_json(tmp_path, embedded_server):
    headers = {"Authorization": f"Bearer {embedded_server.key}"}
    url = embedded_server.url
    with _pdf(tmp_path).open("rb") as body:
        response = httpx.post(f"{url}/jobs", headers=headers, files={"file": ("invoice.pdf", body)})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + 180
    while (job := httpx.get(f"{url}/jobs/{job_id}", headers=headers).json())["status"] not in (
            "succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.3)
    assert job["status"] == "succeeded", job

    got = httpx.get(f"{url}/jobs/{job_id}/result", params={"format": "csv"}, headers=headers)
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv")
    assert list(csv.reader(io.StringIO(got.content.decode(), newline=""))) == INVOICE + MORE

    tables = httpx.get(f"{url}/jobs/{job_id}/result", params={"format": "json"}, headers=headers).json()["tables"]
    assert [(t["pages"], t["rows"], t["columns"]) for t in tables] == [([1, 2], 7, 4)]

    out = tmp_path / "invoice.xlsx"
    cli = subprocess.run([sys.executable, "-m", "cli.main", "result", job_id, "--format", "xlsx", "--out", str(out)],
                         cwd=ROOT, env=embedded_server.env | {"OCRQ_URL": url}, capture_output=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    sheet = load_workbook(out).active
    assert sheet.title == "pages-1-2-table-1"
    assert [c.value for c in sheet[1]] == INVOICE[0]
    assert [c.value for c in sheet[4]] == ["Granite blocks", 140, 12, 1680]
    assert [c.value for c in sheet[7]] == ["Tar", 4, 19.9, 79.6]
