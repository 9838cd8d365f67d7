"""tests/support/servers.py: private Postgres and Redis that start, restart with or without data, and stop."""

from __future__ import annotations

import socket

import psycopg
import pytest
import redis

from tests.support.servers import PostgresServer, RedisServer, ServerError, postgres_bin_dir, redis_binary


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(postgres_bin_dir() is None, reason="no Postgres binaries (apt-get install postgresql)")
def test_postgres_keeps_its_data_across_a_restart_and_loses_it_when_asked():
    with PostgresServer() as pg:
        assert pg.url.startswith("postgresql://postgres@127.0.0.1:")
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE kept")
        with psycopg.connect(pg.database_url("kept"), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (v int)")
            conn.execute("INSERT INTO t VALUES (7)")
            assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        port = pg.port
        pg.restart(keep_data=True)
        assert pg.port == port
        with psycopg.connect(pg.database_url("kept")) as conn:
            assert conn.execute("SELECT v FROM t").fetchall() == [(7,)]
        pg.restart(keep_data=False)
        with psycopg.connect(pg.url) as conn:
            assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'kept'").fetchone()[0] == 0
        pg.stop(hard=True)
        assert not _listening(port)
        pg.start()
        psycopg.connect(pg.url).close()
    assert not _listening(port)
    assert not pg.dir.exists()


@pytest.mark.skipif(redis_binary() is None, reason="no redis-server (apt-get install redis-server)")
def test_redis_keeps_its_data_across_a_restart_and_comes_back_empty_when_asked():
    with RedisServer() as rd:
        client = redis.Redis.from_url(rd.url)
        client.set("k", "v")
        assert client.config_get("save") == {"save": ""}
        port = rd.port
        rd.restart(keep_data=True)
        assert rd.port == port and client.get("k") == b"v"
        rd.restart(keep_data=False)
        assert client.get("k") is None
        rd.stop()
        assert not _listening(port)
        with pytest.raises(redis.ConnectionError):
            client.ping()
        rd.start()
        assert client.ping()
    assert not _listening(port)


@pytest.mark.skipif(redis_binary() is None, reason="no redis-server")
def test_a_taken_port_is_a_plain_error():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        server = RedisServer(port=squatter.getsockname()[1], timeout=10)
        with pytest.raises(ServerError, match="redis exited"):
            server.start()
        server.close()
