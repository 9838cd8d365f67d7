"""GET /jobs?limit=100 for a tenant with N jobs in Postgres: the first page and the 50th through the cursor.

A fresh database migrated to head gets N generated job rows of one tenant (one a second, three statuses) and N/5
of another, then ANALYZE. The API runs in this process (TestClient), so each figure is the route's whole work:
auth, the keyset query, building 100 rows, JSON. Each page is asked --repeat times; medians in ms. Then the same
with the list's index swapped for the one before migration 0012 (tenant_id, created_at), side by side.

    nice -n 10 .venv/bin/python bench/job_lists.py --jobs 1000000 --repeat 30
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from api.app import create_app  # noqa: E402
from common import listing  # noqa: E402
from common.settings import Settings  # noqa: E402
from tests.conftest import fresh_database  # noqa: E402

KEY = "ocrq_bench_lists_key_000000000000000000"
GENERATE = """
INSERT INTO jobs (id, tenant_id, status, source_kind, source_uri, pages_total, pages_done, pages_failed, output,
                  priority, metadata, created_at, updated_at, event_seq, erase_pending)
SELECT md5(%(tenant)s || i::text), %(tenant)s, (ARRAY['succeeded','failed','canceled'])[i %% 3 + 1], 'upload',
       'upload:doc.pdf', 3, 3, 0, 'markdown', 'bulk', jsonb_build_object('n', i::text)::json,
       now() - make_interval(secs => i), now(), 0, false
FROM generate_series(1, %(n)s) AS i
"""


def timed(client: TestClient, params: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    response = client.get("/jobs", params=params)
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 200, response.text
    return elapsed, response.json()


def query_ms(url: str, cursor: str | None, repeat: int) -> float:
    """The list's query alone, as Postgres times it (EXPLAIN ANALYZE's execution time), median."""
    where, params = "", {}
    if cursor:
        created_at, row_id = listing.decode_cursor(cursor)
        where, params = "AND (created_at, id) < (%(created)s, %(id)s)", {"created": created_at, "id": row_id}
    sql = (f"EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM jobs WHERE tenant_id = 'bench' {where} "
           "ORDER BY created_at DESC, id DESC LIMIT 101")
    with psycopg.connect(url) as conn:
        return statistics.median(conn.execute(sql, params).fetchone()[0][0]["Execution Time"] for _ in range(repeat))


def measure(client: TestClient, repeat: int, label: str, url: str) -> None:
    """The three asks in turn, `repeat` rounds, so a busy moment of the shared machine weighs on all alike."""
    cursor = client.get("/jobs", params={"limit": 100}).json()["next"]
    for _ in range(48):  # to the cursor of page 50
        cursor = client.get("/jobs", params={"limit": 100, "cursor": cursor}).json()["next"]
    asks = {"first page": {"limit": 100}, "page 50": {"limit": 100, "cursor": cursor},
            "status=failed first page": {"limit": 100, "status": "failed"}}
    samples: dict[str, list[float]] = {name: [] for name in asks}
    for _ in range(repeat):
        for name, params in asks.items():
            elapsed, body = timed(client, params)
            assert len(body["jobs"]) == 100
            samples[name].append(elapsed)
    figures = ", ".join(f"{name} {statistics.median(values):.1f} ms (p90 {sorted(values)[int(0.9 * len(values))]:.1f})"
                        for name, values in samples.items())
    print(f"{label}: {figures}  (medians of {repeat})")
    print(f"{label}: the query alone in Postgres: first page {query_ms(url, None, repeat):.2f} ms, "
          f"page 50 {query_ms(url, cursor, repeat):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with fresh_database() as url, tempfile.TemporaryDirectory(prefix="ocrq-lists-") as home:
        started = time.monotonic()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(GENERATE, {"tenant": "bench", "n": args.jobs})
            conn.execute(GENERATE, {"tenant": "other", "n": args.jobs // 5})
            conn.execute("ANALYZE jobs")
        print(f"generated {args.jobs} + {args.jobs // 5} job rows in {time.monotonic() - started:.0f} s")
        settings = Settings(home=Path(home), database_url=url, storage_url=f"file://{home}/storage",
                            api_keys=[f"bench:{KEY}"], rate_limit_rps=0)
        with TestClient(create_app(settings)) as client:
            client.headers["Authorization"] = f"Bearer {KEY}"
            measure(client, args.repeat, "index (tenant_id, created_at, id) [0012]", url)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP INDEX ix_jobs_tenant_created")
                conn.execute("DROP INDEX ix_jobs_tenant_status_created")
                conn.execute("CREATE INDEX ix_jobs_tenant_created ON jobs (tenant_id, created_at)")
                conn.execute("ANALYZE jobs")
            measure(client, args.repeat, "index (tenant_id, created_at) [before 0012]", url)


if __name__ == "__main__":
    main()
