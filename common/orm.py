"""Declarative base with a naming convention, so Alembic constraint names are stable."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import JSON, DateTime, MetaData, func
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator):
    """Timezone-aware on the way out on every database; SQLite would otherwise return naive values."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value, dialect):
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime(), dict: JSON}


def utcnow() -> datetime:
    return datetime.now(UTC)


def statement_now(session: Session):
    """Now, for a value an UPDATE writes: the database's clock as the statement runs (Postgres: after its snapshot;
    SQLite: holding the write lock), so a claim that sees another page's commit never stamps an earlier time than
    that page did, whichever worker's clock is ahead. Python's clock on other databases."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return func.clock_timestamp()
    if dialect == "sqlite":  # UTC, in the text form SQLAlchemy stores (%f is seconds with milliseconds)
        return func.strftime("%Y-%m-%d %H:%M:%f000", "now")
    return utcnow()


def new_id() -> str:
    return uuid.uuid4().hex
