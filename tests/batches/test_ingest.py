"""A whole prefix in, results out: about 120 small objects through a real worker, then re-runs that skip.

OCR is kept cheap: the documents are 120x120 px images of one word (a PDF and a TIFF of two pages among
them), so the run costs about 80 rapidocr pages, 0.2 s each on an idle 2-core machine. The listing is read
in pages of 20 keys, so the prefix takes several.
"""

from __future__ import annotations

import io
import re
from collections import Counter

import pytest
from PIL import Image
from rich.console import Console
from sqlalchemy import func, select

from cli import ingest as ingesting
from common.jobs.models import Job
from ocrq.client import Client
from tests.batches.support import (
    new_bucket,
    read_manifest,
    read_object,
    upload,
    wait_for_batch,
    word_for,
    word_image,
    word_pdf,
)
from tests.conftest import KEY_A, make_settings
from tests.support.pdf_checks import page_sizes, poppler_text, qpdf_check
from tests.support.stack import Stack

PNGS = 60
OTHER_FORMATS = ("JPEG", "TIFF", "WEBP")
PDFS = 4
NOT_DOCUMENTS = 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("ingest"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             batch_list_page_size=20)
    with Stack(settings, logs=tmp_path_factory.mktemp("ingest-logs")) as running:
        running.start_worker()
        yield running


@pytest.fixture()
def client(stack):
    return stack.client(KEY_A)


def two_page_tiff(words: list[str]) -> bytes:
    first, *rest = [Image.open(io.BytesIO(word_image(w))) for w in words]
    buffer = io.BytesIO()
    first.save(buffer, "TIFF", save_all=True, append_images=rest)
    return buffer.getvalue()


def two_page_pdf(words: list[str]) -> bytes:
    first, *rest = [Image.open(io.BytesIO(word_image(w))).convert("RGB") for w in words]
    buffer = io.BytesIO()
    first.save(buffer, "PDF", save_all=True, append_images=rest, resolution=72)
    return buffer.getvalue()


def corpus() -> tuple[dict[str, bytes], dict[str, list[str]], set[str], set[str]]:
    """Objects by key; the words each document holds (by key relative to scans/); corrupt and skipped keys."""
    objects: dict[str, bytes] = {}
    words: dict[str, list[str]] = {}

    def document(rel: str, data: bytes, held: list[str]) -> None:
        objects[f"scans/{rel}"] = data
        words[rel] = held

    n = 0
    for n in range(PNGS):
        document(f"dept{n % 4}/{2024 + n % 3}/{'batch/' * (n % 2)}scan{n:03d}.png", word_image(word_for(n)),
                 [word_for(n)])
    for i, fmt in enumerate(OTHER_FORMATS * 3, start=PNGS):
        ext = {"JPEG": "jpg", "TIFF": "tif", "WEBP": "webp"}[fmt]
        document(f"photos/{fmt.lower()}/p{i}.{ext}", word_image(word_for(i), fmt=fmt), [word_for(i)])
    base = PNGS + len(OTHER_FORMATS) * 3
    for i in range(base, base + PDFS):
        document(f"contracts/c{i}.pdf", word_pdf(word_for(i)), [word_for(i)])
    document("contracts/two-pages.pdf", two_page_pdf([word_for(900), word_for(901)]), [word_for(900), word_for(901)])
    document("faxes/two-pages.tiff", two_page_tiff([word_for(902), word_for(903)]), [word_for(902), word_for(903)])
    corrupt = {"scans/bad/corrupt.pdf", "scans/bad/truncated.png"}
    objects["scans/bad/corrupt.pdf"] = b"%PDF-1.7\n" + bytes(range(256)) * 8
    objects["scans/bad/truncated.png"] = word_image("lost")[:120]
    other = ("txt", "csv", "json", "docx", "xml")
    skipped = {f"scans/dept{n % 4}/{2024 + n % 3}/notes{n}.{other[n % 5]}" for n in range(NOT_DOCUMENTS - 5)}
    skipped |= {"scans/index.json", "scans/README", "scans/dept1/Thumbs.db", "scans/empty.png", "scans/drafts/d.png"}
    # "-" sorts before "/": listed depth-first by SeaweedFS after contracts/…, first in S3's byte order.
    skipped.add("scans/contracts-index.txt")
    for key in skipped:
        objects[key] = b"" if key == "scans/empty.png" else b"not a document"
    objects["scans/drafts/d.png"] = word_image("draft")
    return objects, words, corrupt, skipped


@pytest.fixture(scope="module")
def prefix(stack, s3):
    client = s3.client()
    bucket = new_bucket(client)
    client.create_bucket(Bucket=f"{bucket}-out")
    objects, words, corrupt, skipped = corpus()
    upload(client, bucket, objects)
    return {"bucket": bucket, "objects": objects, "words": words, "corrupt": corrupt, "skipped": skipped,
            "body": {"input_prefix": f"s3://{bucket}/scans/", "output_prefix": f"s3://{bucket}-out/ocr/",
                     "exclude": ["drafts/*"], "metadata": {"team": "records"}}}


def read_words(text: str) -> str:
    return re.sub(r"\s+", "", re.sub(r"<!--.*?-->", "", text))


@pytest.mark.timeout(900)
def test_a_prefix_is_read_once_with_every_result_at_its_mirror_key(client, stack, s3, prefix):
    response = client.post("/batches", json=prefix["body"])
    assert response.status_code == 202, response.text
    batch_id = response.json()["id"]
    body = wait_for_batch(client, batch_id, timeout=840)

    words, objects = prefix["words"], prefix["objects"]
    documents = len(words)
    assert body["status"] == "completed", body
    assert body["listed"] == len(objects)
    assert (body["succeeded"], body["failed"], body["skipped"]) == (documents, 2, len(prefix["skipped"]))
    assert (body["queued"], body["running"], body["canceled"], body["skipped_existing"]) == (0, 0, 0, 0)
    assert sum(body[k] for k in ("succeeded", "failed", "skipped", "skipped_existing", "canceled")) == body["listed"]
    pages = sum(len(held) for held in words.values())
    assert body["pages"] == {"total": pages, "done": pages, "failed": 0}
    assert body["rates"]["objects_per_s"] > 0 and body["eta_s"] == 0

    out = s3.client()
    bucket_out = f"{prefix['bucket']}-out"
    listed = {o["Key"] for page in out.get_paginator("list_objects_v2").paginate(Bucket=bucket_out)
              for o in page.get("Contents", [])}
    assert listed == {f"ocr/{rel}.md" for rel in words} | {"ocr/_manifest.jsonl"}
    for rel, held in words.items():
        text = read_object(out, f"s3://{bucket_out}/ocr/{rel}.md")
        assert [word in read_words(text) for word in held] == [True] * len(held), (rel, held, text)
        assert text.count("<!-- ocrq:page") == len(held)

    manifest = read_manifest(out, body["manifest"])
    assert body["manifest"] == f"s3://{bucket_out}/ocr/_manifest.jsonl"
    assert [line["key"] for line in manifest] == sorted(objects)
    assert Counter(line["status"] for line in manifest) == {"succeeded": documents, "failed": 2,
                                                             "skipped": len(prefix["skipped"])}
    by_key = {line["key"]: line for line in manifest}
    for rel, held in words.items():
        line = by_key[f"scans/{rel}"]
        assert line["result_key"] == f"s3://{bucket_out}/ocr/{rel}.md" and line["pages"] == len(held), line
        assert line["error"] is None and line["relative_key"] == rel
    for key in prefix["corrupt"]:
        assert by_key[key]["error"] and by_key[key]["result_key"] is None, by_key[key]
    assert by_key["scans/drafts/d.png"]["reason"] == "excluded by include/exclude patterns"
    assert by_key["scans/README"]["reason"] == "not a document type (no extension)"

    with stack.services.db.session() as session:
        jobs = session.execute(select(Job.source_uri, Job.source_key).where(Job.batch_id == batch_id)).all()
    assert len(jobs) == documents + 2 and len({uri for uri, _ in jobs}) == len(jobs)
    assert {key for _, key in jobs} == {None}  # read straight from the source bucket, never copied

    # The same request again: every document already has a result for its key, ETag and options.
    rerun = wait_for_batch(client, client.post("/batches", json=prefix["body"]).json()["id"], timeout=120)
    assert rerun["status"] == "completed"
    assert (rerun["skipped_existing"], rerun["succeeded"], rerun["failed"]) == (documents + 2, 0, 0)
    assert rerun["skipped"] == len(prefix["skipped"]) and rerun["listed"] == len(objects)
    with stack.services.db.session() as session:
        assert session.scalar(select(func.count()).where(Job.batch_id == rerun["id"])) == 0
    again = {line["key"]: line for line in read_manifest(out, rerun["manifest"])}
    assert again.keys() == by_key.keys()
    for rel in words:
        assert again[f"scans/{rel}"]["status"] == "skipped_existing"
        assert again[f"scans/{rel}"]["result_key"] == by_key[f"scans/{rel}"]["result_key"]

    # One object changes (a new ETag) and failures are asked to be retried: only those are read again.
    changed = "dept0/2024/scan000.png"
    out_before = read_object(out, f"s3://{bucket_out}/ocr/{changed}.md")
    out.put_object(Bucket=prefix["bucket"], Key=f"scans/{changed}", Body=word_image("changed42"))
    third = wait_for_batch(client, client.post("/batches", json=prefix["body"] | {"retry_failed": True}).json()["id"],
                           timeout=120)
    assert (third["succeeded"], third["failed"], third["skipped_existing"]) == (1, 2, documents - 1)
    assert "changed42" in read_words(read_object(out, f"s3://{bucket_out}/ocr/{changed}.md"))
    assert out_before != read_object(out, f"s3://{bucket_out}/ocr/{changed}.md")


def test_ocrq_ingest_waits_with_a_progress_bar(stack, s3, capsys):
    out = s3.client()
    bucket = new_bucket(out)
    upload(out, bucket, {f"in/{i}.png": word_image(word_for(i)) for i in range(3)} | {"in/x.txt": b"x"})
    cli = Client(http=stack.client(KEY_A))
    body = {"input_prefix": f"s3://{bucket}/in/", "output_prefix": f"s3://{bucket}/out/", "output": "text"}
    screen = io.StringIO()
    assert ingesting.run(cli, body=body, wait=True, interval=0.2, console=Console(file=screen, width=200))
    batch_id = capsys.readouterr().out.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", batch_id)
    assert "completed: 3 succeeded, 0 failed, 0 canceled, 1 skipped, 0 already done, of 4 listed" in screen.getvalue()
    assert f"manifest: s3://{bucket}/out/_manifest.jsonl" in screen.getvalue()
    assert "4/4 objects" in screen.getvalue()
    assert word_for(2) in read_object(out, f"s3://{bucket}/out/2.png.txt")


def test_a_pdf_batch_writes_a_searchable_pdf_per_document(client, s3, tmp_path):
    out = s3.client()
    bucket = new_bucket(out)
    upload(out, bucket, {"in/scan.png": word_image(word_for(7)), "in/two.pdf": two_page_pdf([word_for(8), word_for(9)])})
    body = {"input_prefix": f"s3://{bucket}/in/", "output_prefix": f"s3://{bucket}/out/", "output": "pdf"}
    batch = wait_for_batch(client, client.post("/batches", json=body).json()["id"], timeout=300)
    assert (batch["status"], batch["succeeded"]) == ("completed", 2), batch
    for key, words in (("scan.png", [word_for(7)]), ("two.pdf", [word_for(8), word_for(9)])):
        path = tmp_path / f"{key}.pdf"
        path.write_bytes(out.get_object(Bucket=bucket, Key=f"out/{key}.pdf")["Body"].read())
        qpdf_check(path)
        assert len(page_sizes(path)) == len(words)
        for n, word in enumerate(words, start=1):
            assert word in poppler_text(path, n)
