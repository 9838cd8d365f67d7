"""Small SQL helpers that differ by dialect."""

from __future__ import annotations

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_ignoring_conflicts(session: Session, model: type, rows: list[dict], *, keys: list[str]) -> None:
    """INSERT ... ON CONFLICT DO NOTHING, so repeating an insert is harmless."""
    if not rows:
        return
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    session.execute(dialect.insert(model).values(rows).on_conflict_do_nothing(index_elements=keys))
