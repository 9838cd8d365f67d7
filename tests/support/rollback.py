"""A Database whose every session runs inside one outer transaction that is rolled back at the end.

For service-level tests that need isolation only, not a committed state seen by another process (a worker, a
second API): the service functions open their sessions through Database.session() as usual, and each of those
sessions joins the one connection's outer transaction on a SAVEPOINT (SQLAlchemy 2, "Joining a Session into an
External Transaction", join_transaction_mode="create_savepoint"). A session's commit releases its savepoint and
its rollback goes back to it, so the code under test behaves as on its own; nothing reaches the database.

Not for: work spread over threads or processes (one connection is not shared), tests that need row locks
between two connections, and SQLite (pysqlite's own transaction handling gets in the way of SAVEPOINT).
The ORM's timestamps come from Python (common.orm.utcnow), so one long transaction does not freeze time.
"""

from __future__ import annotations

from sqlalchemy.orm import sessionmaker

from common.db import Database, make_engine


class RolledBackDatabase(Database):
    """Database's interface on one connection; dispose() rolls everything back and closes it."""

    def __init__(self, url: str) -> None:  # Database.__init__ is not called: no pool of its own to hand out
        self.engine = make_engine(url)
        if self.engine.dialect.name != "postgresql":
            raise ValueError("RolledBackDatabase is for Postgres only")
        self.connection = self.engine.connect()
        self._outer = self.connection.begin()
        self.sessions = sessionmaker(bind=self.connection, expire_on_commit=False,
                                     join_transaction_mode="create_savepoint")

    def dispose(self) -> None:
        try:
            if self._outer.is_active:
                self._outer.rollback()
            self.connection.close()
        finally:
            self.engine.dispose()
