"""A batch writes its `output` and each of `output_formats` beside it, layout formats included."""

from __future__ import annotations

import csv
import io
import zipfile

from openpyxl import load_workbook

from tests.batches.support import new_bucket, upload, wait_for_batch, word_for, word_image
from tests.batches.test_ingest import two_page_pdf
from tests.support.table_pages import INVOICE, draw_table
from tests.support.layout_checks import hocr_check, valid_alto, valid_page_zip

ALTO = "{http://www.loc.gov/standards/alto/ns-v4#}"


def test_a_batch_writes_every_format_asked_for(client, s3):
    out = s3.client()
    bucket = new_bucket(out)
    upload(out, bucket, {"in/scan.png": word_image(word_for(3)), "in/two.pdf": two_page_pdf([word_for(4), word_for(5)])})
    body = {"input_prefix": f"s3://{bucket}/in/", "output_prefix": f"s3://{bucket}/out/", "output": "alto",
            "output_formats": ["hocr", "page", "markdown", "alto", "csv", "xlsx"]}
    batch = wait_for_batch(client, client.post("/batches", json=body).json()["id"], timeout=300)
    assert (batch["status"], batch["succeeded"]) == ("completed", 2), batch
    assert batch["output_formats"] == ["hocr", "page", "markdown", "csv", "xlsx"]  # the output is not repeated

    def read(key: str) -> bytes:
        return out.get_object(Bucket=bucket, Key=f"out/{key}")["Body"].read()

    written = sorted(o["Key"] for o in out.list_objects_v2(Bucket=bucket, Prefix="out/").get("Contents", []))
    for key, words in (("scan.png", [word_for(3)]), ("two.pdf", [word_for(4), word_for(5)])):
        alto = valid_alto(read(f"{key}.alto.xml"))
        assert [s.get("CONTENT") for s in alto.iter(f"{ALTO}String")] == words
        hocr_check(read(f"{key}.hocr"), overlap=False)
        assert len(valid_page_zip(read(f"{key}.page.zip"))) == len(words)
        assert all(word in read(f"{key}.md").decode() for word in words)
        # No table on these pages: an empty zip of CSVs, and a workbook with its one empty sheet.
        assert f"out/{key}.csv.zip" in written, written
        assert zipfile.ZipFile(io.BytesIO(read(f"{key}.csv.zip"))).namelist() == []
        assert load_workbook(io.BytesIO(read(f"{key}.xlsx"))).sheetnames == ["no tables"]


def test_a_batch_writes_a_pages_table_as_csv_and_xlsx(client, s3):
    out = s3.client()
    bucket = new_bucket(out)
    image, _ = draw_table(INVOICE)
    png = io.BytesIO()
    image.save(png, "PNG")
    upload(out, bucket, {"in/invoice.png": png.getvalue()})
    body = {"input_prefix": f"s3://{bucket}/in/", "output_prefix": f"s3://{bucket}/out/", "output": "csv",
            "output_formats": ["xlsx"]}
    batch = wait_for_batch(client, client.post("/batches", json=body).json()["id"], timeout=300)
    assert (batch["status"], batch["succeeded"]) == ("completed", 1), batch

    def read(key: str) -> bytes:
        return out.get_object(Bucket=bucket, Key=f"out/{key}")["Body"].read()

    assert list(csv.reader(io.StringIO(read("invoice.png.csv").decode(), newline=""))) == INVOICE
    sheet = load_workbook(io.BytesIO(read("invoice.png.xlsx"))).active
    assert sheet.title == "page-1-table-1"
    assert [c.value for c in sheet[1]] == INVOICE[0]
    assert [c.value for c in sheet[4]] == ["Granite blocks", 140, 12, 1680]
