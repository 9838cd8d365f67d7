"""Alembic environment: the database URL comes from the one settings object."""

from __future__ import annotations

from alembic import context

from common.db import make_engine
from common.settings import get_settings
from common.tables import Base

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    url = config.attributes.get("database_url") or get_settings().resolved_database_url
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=connection.dialect.name == "sqlite")
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations()
