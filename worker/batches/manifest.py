"""`_manifest.jsonl`: one line per listed object, streamed from the database through a temporary file."""

from __future__ import annotations

import json
import tempfile

from sqlalchemy import select

from common.batches.models import Batch, BatchItem
from common.batches.objects import manifest_key, relative_key
from worker.context import WorkerContext

CHUNK = 5000


def manifest_line(item: BatchItem, *, batch: Batch) -> dict:
    return {
        "key": item.key,
        "relative_key": relative_key(item.key, prefix=batch.input_prefix),
        "status": item.status,
        "pages": item.pages,
        "error": item.error,
        "result_key": item.result_key,
        "reason": item.reason,
        "etag": item.etag,
        "size": item.size,
        "job_id": item.job_id,
    }


def write_manifest(ctx: WorkerContext, *, batch: Batch) -> str:
    """Every item of the batch in byte order of its key, a chunk at a time; returns the manifest's s3:// URI.

    Byte order is S3's own listing order; a store may list otherwise (SeaweedFS goes depth-first).
    """
    key = manifest_key(batch.output_prefix)
    # Postgres compares text by its collation; "C" compares bytes. SQLite's default (BINARY) already does.
    ordered = BatchItem.key.collate("C") if ctx.db.engine.dialect.name == "postgresql" else BatchItem.key
    with tempfile.TemporaryFile() as spool:
        last_key: str | None = None
        while True:
            query = select(BatchItem).where(BatchItem.batch_id == batch.id)
            if last_key is not None:
                query = query.where(ordered > last_key)
            with ctx.db.session() as session:
                items = list(session.scalars(query.order_by(ordered).limit(CHUNK)))
            if not items:
                break
            for item in items:
                spool.write(json.dumps(manifest_line(item, batch=batch), ensure_ascii=False).encode() + b"\n")
            last_key = items[-1].key
        spool.seek(0)
        ctx.s3_for_batch(batch, "write").upload_fileobj(
            spool, batch.output_bucket, key, ExtraArgs={"ContentType": "application/x-ndjson"}
        )
    return f"s3://{batch.output_bucket}/{key}"
