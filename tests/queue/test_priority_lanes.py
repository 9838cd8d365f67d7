"""Priority lanes on the GPU path, with CPU stand-in engines for the interactive and the bulk vLLM engine:
each lane's pages are read by its own engines, an interactive page never waits behind bulk pages, and
/readyz and /metrics show every engine with its lane and its weight-sharing state."""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from common.engines import lanes as engine_lanes
from common.jobs.models import Page
from common.queue.names import (
    CONTROL_QUEUE,
    PREPARE_BULK_QUEUE,
    WEBHOOK_QUEUE,
    gpu_worker_default_queues,
    gpu_worker_queues,
)
from common.settings import Settings
from tests.api.test_metrics import samples_of
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import pdf_of, text_page
from tests.support.engine_server import MODEL, running_cpu_engine
from tests.support.stack import Stack, wait_for_job
from worker.run import node_name

BULK_WORDS = ["granite", "saffron", "lattice", "quiver", "meadow", "cobalt"]


def test_the_workers_of_one_host_have_node_names_of_their_own():
    names = [
        node_name(gpu=False, lane="all", queues=[]),
        node_name(gpu=False, lane="all", queues=[WEBHOOK_QUEUE]),
        node_name(gpu=True, lane="bulk", queues=[]),
        node_name(gpu=True, lane="interactive", queues=[]),
    ]
    assert len(set(names)) == 4
    assert all(name.startswith("ocrq-") and name.endswith("@%h") for name in names)


def test_a_lane_worker_takes_its_lanes_engines_pair_size_and_queues_only():
    settings = Settings(_env_file=None, engine="vllm", engine_urls=["http://bulk:8100"],
                        engine_interactive_urls=["http://fast:8101"], engine_pair_size=4)
    interactive = engine_lanes.for_lane(settings, "interactive")
    assert interactive.engine_urls == ["http://fast:8101"] and interactive.engine_pair_size == 1
    assert engine_lanes.for_lane(settings, "bulk").engine_urls == ["http://bulk:8100"]
    assert engine_lanes.for_lane(settings, "bulk").engine_pair_size == 4
    # Without interactive engines the interactive lane shares the bulk ones, still one page at a time.
    shared = engine_lanes.for_lane(settings.model_copy(update={"engine_interactive_urls": []}), "interactive")
    assert shared.engine_urls == ["http://bulk:8100"] and shared.engine_pair_size == 1
    with pytest.raises(ValueError):
        engine_lanes.for_lane(settings, "urgent")

    assert gpu_worker_default_queues("interactive") == [CONTROL_QUEUE, *gpu_worker_queues("interactive")]
    assert gpu_worker_default_queues("bulk") == [PREPARE_BULK_QUEUE, *gpu_worker_queues("bulk")]
    assert gpu_worker_default_queues("all") == gpu_worker_default_queues("interactive") + gpu_worker_default_queues(
        "bulk")


@pytest.fixture(scope="module")
def engines():
    with running_cpu_engine(lane="interactive", concurrency=1) as interactive, \
            running_cpu_engine(lane="bulk", concurrency=1) as bulk:
        yield interactive, bulk


@pytest.fixture(scope="module")
def lanes_stack(tmp_path_factory, pg_url, redis_url, s3, engines):
    interactive, bulk = engines
    tmp = tmp_path_factory.mktemp("lanes")
    # Both workers see both lists of engines: only their lane decides which one they use.
    settings = make_settings(home=tmp / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[bulk.url], engine_interactive_urls=[interactive.url],
                             engine_model=MODEL, engine_pair_size=2, engine_backoff_s=0.2)
    with Stack(settings, logs=tmp) as stack:
        stack.start_worker("--gpu", "--lane", "bulk", "--concurrency", "1")
        stack.start_worker("--gpu", "--lane", "interactive", "--concurrency", "1")
        yield stack


def test_a_threads_worker_lets_every_threads_batch_be_in_flight_through_its_one_engine_client():
    settings = Settings(_env_file=None, engine="vllm", engine_urls=["http://bulk:8100"], engine_pair_size=2,
                        engine_max_in_flight=64)
    threads = engine_lanes.for_worker(settings, lane="bulk", pool="threads", concurrency=512)
    assert threads.engine_max_in_flight == 1024 and threads.engine_pair_size == 2
    # Each prefork process builds its own client: 32 processes x 2 never meet the cap of 64.
    assert engine_lanes.for_worker(settings, lane="bulk", pool="prefork", concurrency=512).engine_max_in_flight == 64
    # A cap above what the threads can send is the operator's and stays.
    assert engine_lanes.for_worker(settings, lane="bulk", pool="threads", concurrency=8).engine_max_in_flight == 64
    # The interactive lane's pair size (1) is what counts there.
    fast = engine_lanes.for_worker(settings, lane="interactive", pool="threads", concurrency=100)
    assert fast.engine_max_in_flight == 100


def _submit(client, path, *, priority: str) -> str:
    response = client.post("/jobs", files={"file": (path.name, path.read_bytes())}, data={"priority": priority})
    assert response.status_code == 202, response.text
    return response.json()["id"]


def _pages(client, job_id) -> list[dict]:
    return client.get(f"/jobs/{job_id}/result", params={"format": "json"}).json()["pages"]


def test_interactive_pages_go_to_their_engine_and_never_wait_behind_bulk(lanes_stack, engines, tmp_path):
    interactive, bulk = engines
    interactive.reset()
    bulk.reset()
    client = lanes_stack.client(KEY_A)
    # The big-batch engine is busy: each bulk request takes 3 s more, so the bulk backlog outlasts one page.
    bulk.faults("delay", count=-1, delay_s=3.0)
    bulk_pdf = pdf_of([text_page(f"Bulk {i + 1} {word}") for i, word in enumerate(BULK_WORDS)], tmp_path / "b.pdf")
    bulk_id = _submit(client, bulk_pdf, priority="bulk")
    deadline = time.monotonic() + 60
    while not bulk.requests():
        assert time.monotonic() < deadline, "the bulk engine never got a page"
        time.sleep(0.2)

    urgent_pdf = pdf_of([text_page("Urgent invoice 4711")], tmp_path / "i.pdf")
    urgent_id = _submit(client, urgent_pdf, priority="interactive")
    urgent = wait_for_job(client, urgent_id, timeout=60)
    bulk_then = client.get(f"/jobs/{bulk_id}").json()
    assert urgent["status"] == "succeeded", urgent
    assert bulk_then["pages_done"] < bulk_then["pages_total"], bulk_then

    bulk.clear_faults()
    finished = wait_for_job(client, bulk_id, timeout=180)
    assert finished["status"] == "succeeded" and finished["pages_done"] == len(BULK_WORDS), finished

    (page,) = _pages(client, urgent_id)
    assert "4711" in page["text"]
    pages = _pages(client, bulk_id)
    assert all(word in p["text"] for p, word in zip(pages, BULK_WORDS, strict=True))
    # Which engine read each page is recorded for operators, never shown to the tenant.
    assert "engine_url" not in page and all("engine_url" not in p for p in pages)
    with lanes_stack.services.db.session() as session:
        used = dict(session.execute(select(Page.job_id, Page.engine_url).where(Page.job_id == urgent_id)).all())
        bulk_used = list(session.scalars(select(Page.engine_url).where(Page.job_id == bulk_id).order_by(Page.index)))
    assert used == {urgent_id: interactive.url}
    assert bulk_used == [bulk.url] * len(BULK_WORDS)
    assert len(interactive.requests()) == 1 and len(bulk.requests()) == len(BULK_WORDS)


def test_readyz_lists_each_engine_with_its_lane_and_weights(lanes_stack, engines):
    interactive, bulk = engines
    response = lanes_stack.client(None).get("/readyz")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["checks"]["engine"] == "ok"
    by_url = {engine["url"]: engine for engine in body["engines"]}
    assert set(by_url) == {interactive.url, bulk.url}
    for server, lane in ((interactive, "interactive"), (bulk, "bulk")):
        entry = by_url[server.url]
        assert entry["lane"] == lane and entry["up"] is True
        weights = entry["weights"]
        assert weights["role"] == "own" and weights["lane"] == lane and weights["state"] == "ok"
        assert isinstance(weights["engine_pid"], int) and weights["holder_pid"] is None
        assert weights["shared_bytes"] == 0 and weights["kv_cache_bytes"] is None


def test_readyz_is_503_naming_the_lane_whose_engine_stopped(tmp_path, pg_url, redis_url, s3, engines):
    _, bulk = engines
    with ExitStack() as doomed_engine:
        doomed = doomed_engine.enter_context(running_cpu_engine(lane="interactive", concurrency=1))
        settings = make_settings(home=tmp_path, pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                                 engine_urls=[bulk.url], engine_interactive_urls=[doomed.url], engine_model=MODEL)
        with TestClient(create_app(settings)) as client:
            assert client.get("/readyz").status_code == 200
            doomed_engine.close()
            response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["engine"].startswith("error: RuntimeError: interactive lane: no engine up")
    assert doomed.url in body["checks"]["engine"] and "bulk" not in body["checks"]["engine"]
    assert {e["url"]: (e["lane"], e["up"], e["weights"] is None) for e in body["engines"]} == {
        doomed.url: ("interactive", False, True), bulk.url: ("bulk", True, False)}
    assert all(body["checks"][name] == "ok" for name in ("database", "broker", "storage"))


def test_metrics_show_each_engine_with_its_lane_and_weight_role(lanes_stack, engines):
    interactive, bulk = engines
    got = samples_of(lanes_stack.client(None).get("/metrics").text)
    for server, lane in ((interactive, "interactive"), (bulk, "bulk")):
        labels = (("lane", lane), ("url", server.url))
        assert got[("ocrq_engine_up", labels)] == 1
        assert got[("ocrq_engine_shared_weight_bytes", (("lane", lane), ("role", "own"), ("url", server.url)))] == 0
        assert ("ocrq_engine_kv_cache_bytes", labels) not in got
    assert got[("ocrq_engines_sharing_weights", ())] == 0


def test_an_engine_whose_weight_holder_is_gone_does_not_count_as_serving_its_lane():
    from common.engines.probe import EngineProbe
    from common.readiness import check_engine

    settings = Settings(engine="vllm", engine_urls=["http://b"], engine_interactive_urls=["http://i"])
    bulk = EngineProbe(url="http://b", lane="bulk", up=True, weights={"role": "holder", "state": "ok"})
    lost = EngineProbe(url="http://i", lane="interactive", up=True,
                       weights={"role": "attached", "state": "holder_lost"})
    with pytest.raises(RuntimeError, match="interactive lane: no engine up .*weight holder is gone"):
        check_engine(settings, [bulk, lost])
    check_engine(settings, [bulk, EngineProbe(url="http://i", lane="interactive", up=True, weights=None)])
