"""Building S3 prefixes of small documents for batch tests, and following a batch to its end."""

from __future__ import annotations

import io
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from PIL import Image, ImageDraw, ImageFont

from tests.documents.hostile import FONT_LATIN

TERMINAL = {"completed", "failed", "canceled"}
WORDS = ("alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "mike", "oscar", "romeo",
         "sierra", "tango", "victor", "yankee")


def word_for(n: int) -> str:
    """A word rapidocr reads exactly in word_image, unique per n."""
    return f"{WORDS[n % len(WORDS)]}{n}"


def word_image(word: str, *, fmt: str = "PNG") -> bytes:
    """The word on a small square: rapidocr scales an image's short side up to 736 px, so square is cheapest."""
    image = Image.new("RGB", (120, 120), "white")
    ImageDraw.Draw(image).text((3, 50), word, font=ImageFont.truetype(FONT_LATIN, 18), fill="black")
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def word_pdf(word: str) -> bytes:
    """A one-page PDF holding the word as an image, small enough to render quickly."""
    image = Image.open(io.BytesIO(word_image(word)))
    buffer = io.BytesIO()
    image.save(buffer, "PDF", resolution=72)
    return buffer.getvalue()


def new_bucket(s3) -> str:
    name = f"b6-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


def upload(s3, bucket: str, objects: dict[str, bytes], *, threads: int = 16) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda kv: s3.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]), objects.items()))


def wait_for_batch(client, batch_id: str, *, timeout: float, until=TERMINAL) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/batches/{batch_id}").json()
        if body["status"] in until and (until != TERMINAL or body["finished_at"]):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"batch {batch_id} still {body['status']} after {timeout}s: {body}")
        time.sleep(0.3)


def read_manifest(s3, uri: str) -> list[dict]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines()]


def read_object(s3, uri: str) -> str:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
