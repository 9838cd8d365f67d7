"""Newest-first lists with an opaque cursor: the (created_at, id) of the last row shown, so rows added since
land before the cursor and a page never repeats or skips a row."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from sqlalchemy import Select, tuple_

from common.errors import Rejected

MAX_LIMIT = 200


def encode_cursor(created_at: datetime, row_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The position a cursor names; 422 `invalid_cursor` for anything this service did not hand out."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, row_id = json.loads(raw)
        if not isinstance(row_id, str) or not isinstance(created, str):
            raise TypeError("not a [time, id] pair")
        return datetime.fromisoformat(created), row_id
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise Rejected(422, "the cursor is not one this service handed out", code="invalid_cursor") from None


def newest_first(query: Select, model, *, cursor: str | None, limit: int) -> Select:
    """`query` ordered newest first, after the cursor's row, one row more than `limit` (to tell if more follow)."""
    if cursor:
        created_at, row_id = decode_cursor(cursor)
        query = query.where(tuple_(model.created_at, model.id) < tuple_(created_at, row_id))
    return query.order_by(model.created_at.desc(), model.id.desc()).limit(limit + 1)


def page(rows: list, *, limit: int) -> tuple[list, str | None]:
    """The rows to show and the cursor for the next page (None on the last)."""
    if len(rows) <= limit:
        return rows, None
    shown = rows[:limit]
    return shown, encode_cursor(shown[-1].created_at, shown[-1].id)
