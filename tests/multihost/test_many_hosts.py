"""ocrq spread over four hosts that share nothing but a network (tests/multihost/cluster.py): uploads, s3_uri jobs,
a batch, webhooks and priority lanes through two API processes and two worker hosts; /readyz and /metrics from the
API host; an API process killed mid-upload; a whole worker host killed, and its pages read on the other."""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from contextlib import ExitStack

import httpx
import psycopg
import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.batches.support import word_for, word_image
from tests.conftest import USER_BUCKET
from tests.documents.hostile import FONT_LATIN
from tests.multihost import cluster as hosts_cluster
from tests.support import hosts
from tests.support.stack import wait_for_job, wait_until

if reason := hosts.available():
    pytest.skip(f"cannot build hosts from namespaces here: {reason}", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with ExitStack() as stack:
        yield hosts_cluster.build(tmp_path_factory.mktemp("many-hosts"), stack)


@pytest.fixture(scope="module")
def receiver(cluster):
    with ExitStack() as stack:
        yield hosts_cluster.start_receiver(cluster, stack)


def short_pdf(pages: int) -> bytes:
    """Small pages of two lines each."""
    font, images = ImageFont.truetype(FONT_LATIN, 22), []
    for n in range(pages):
        image = Image.new("RGB", (600, 160), "white")
        draw = ImageDraw.Draw(image)
        for line in range(2):
            draw.text((20, 20 + line * 36), f"page {n} line {line}: a host may die while this is read", font=font,
                      fill="black")
        images.append(image)
    buffer = io.BytesIO()
    images[0].save(buffer, "PDF", resolution=100, save_all=True, append_images=images[1:])
    return buffer.getvalue()


def test_both_api_processes_are_ready_and_take_uploads_that_both_worker_hosts_read(cluster):
    for url in cluster.api_urls:
        with cluster.client() as client:
            client.base_url = url
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
    jobs = []
    for n in range(2):
        with cluster.client(api=n) as client:
            reply = client.post("/jobs", files={"file": (f"w{n}.png", word_image(word_for(n)))},
                                data={"output": "text"})
            assert reply.status_code == 202, reply.text
            jobs.append(reply.json()["id"])
    with cluster.client() as client:
        for n, job_id in enumerate(jobs):
            assert wait_for_job(client, job_id)["status"] == "succeeded"
            assert word_for(n) in client.get(f"/jobs/{job_id}/result", follow_redirects=True).text


def database(cluster):
    return psycopg.connect(cluster.settings.database_url, autocommit=True)


def test_exactly_one_host_runs_the_sweepers_schedule(cluster):
    leading = [p for p in cluster.processes if hosts_cluster.LEADING in p.text()]
    assert [p.host.name for p in leading] == ["gpu-b"]


def test_readyz_and_metrics_from_the_api_host_see_every_host(cluster):
    with cluster.client() as client:
        assert client.get("/readyz").status_code == 200
        metrics = client.get("/metrics").text
    assert f'ocrq_engine_up{{lane="bulk",url="{cluster.engine_url}"}} 1.0' in metrics or \
        f'ocrq_engine_up{{lane="all",url="{cluster.engine_url}"}} 1.0' in metrics or \
        f'url="{cluster.engine_url}"' in metrics, metrics
    assert 'ocrq_metrics_source_up{source="database"} 1.0' in metrics
    assert 'ocrq_metrics_source_up{source="broker"} 1.0' in metrics
    assert 'ocrq_pages{status="succeeded"}' in metrics
    # Each worker's counters are served on its own host (no file reaches the API host): Prometheus scrapes them.
    scraped = [httpx.get(f"http://{host.address}:{hosts_cluster.METRICS_PORTS['gpu']}/metrics", timeout=5)
               for host in (cluster.gpu_a, cluster.gpu_b)]
    assert [reply.status_code for reply in scraped] == [200, 200]
    assert any("ocrq_pages_processed_total" in reply.text for reply in scraped)  # where the pages were read


def test_an_s3_uri_job_a_batch_with_webhooks_and_an_interactive_job_ahead_of_the_batch(cluster, receiver):
    s3 = cluster.s3.client()
    prefix = f"scans-{uuid.uuid4().hex[:6]}/"
    for n in range(6):
        s3.put_object(Bucket=USER_BUCKET, Key=f"{prefix}{n:02d}.png", Body=word_image(word_for(n)))
    hook = receiver.plan(f"/hook/{uuid.uuid4().hex[:6]}")
    with cluster.client() as client, cluster.client(api=1) as other_api:
        batch = client.post("/batches", json={"input_prefix": f"s3://{USER_BUCKET}/{prefix}",
                                              "output_prefix": f"s3://{USER_BUCKET}/out-{prefix}",
                                              "output": "text", "webhook_url": hook})
        assert batch.status_code == 202, batch.text
        urgent = other_api.post("/jobs", files={"file": ("urgent.png", word_image("urgentword"))},
                                data={"output": "text", "priority": "interactive", "webhook_url": hook})
        from_s3 = other_api.post("/jobs", json={"s3_uri": f"s3://{USER_BUCKET}/{prefix}05.png", "output": "text"})
        assert urgent.status_code == 202 and from_s3.status_code == 202, (urgent.text, from_s3.text)
        assert wait_for_job(other_api, urgent.json()["id"])["status"] == "succeeded"
        assert client.get(f"/batches/{batch.json()['id']}").json()["status"] != "completed", \
            "the interactive job waited behind the bulk batch"
        assert wait_for_job(client, from_s3.json()["id"])["status"] == "succeeded"
        assert word_for(5) in client.get(f"/jobs/{from_s3.json()['id']}/result", follow_redirects=True).text
        deadline = time.monotonic() + 120
        while (state := client.get(f"/batches/{batch.json()['id']}").json())["status"] != "completed":
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
    written = s3.list_objects_v2(Bucket=USER_BUCKET, Prefix=f"out-{prefix}")
    assert len([o for o in written.get("Contents", []) if not o["Key"].endswith(".json")]) >= 6
    path = hook.removeprefix(receiver.url)
    wait_until(lambda: {"job.succeeded", "batch.completed"} <= {json.loads(r.body)["type"] for r in receiver.to(path)},
               timeout=30, what="the job's and the batch's events")
    assert all(r.verified for r in receiver.to(path))
    with database(cluster) as db:
        engines = db.execute("SELECT DISTINCT engine_url FROM pages").fetchall()
    assert engines == [(cluster.engine_url,)]


def test_tenant_urls_to_the_hosts_of_the_service_are_refused(cluster):
    with cluster.client() as client:
        for url in (f"{cluster.s3.endpoint}/{hosts_cluster.BUCKET}/x.png", f"{cluster.api_urls[1]}/healthz",
                    f"{cluster.engine_url}/v1/models"):
            reply = client.post("/jobs", json={"source_url": url, "output": "text"})
            if reply.status_code == 202:
                body = wait_for_job(client, reply.json()["id"])
                assert body["status"] == "failed" and body["error"], body
            else:
                assert reply.status_code in (400, 422), reply.text
            hooked = client.post("/jobs", files={"file": ("w.png", word_image("hook"))},
                                 data={"output": "text", "webhook_url": url})
            assert hooked.status_code in (400, 422), hooked.text


def test_an_api_process_killed_mid_upload_leaves_nothing_and_the_other_takes_the_retry(cluster):
    doomed = next(p for p in cluster.processes if p.name == f"api-{hosts_cluster.API_PORTS[0]}")
    body, key, name = word_image("retried"), uuid.uuid4().hex, f"{uuid.uuid4().hex[:8]}.png"
    half_sent = threading.Event()

    def slow_upload():
        boundary = "ocrqboundary"
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
               "Content-Type: image/png\r\n\r\n").encode() + body[: len(body) // 2]
        half_sent.set()
        time.sleep(5)  # the API dies in here
        yield body[len(body) // 2:] + f"\r\n--{boundary}--\r\n".encode()

    with cluster.client() as client:
        killer = threading.Thread(target=lambda: (half_sent.wait(10), time.sleep(0.5), doomed.kill()))
        killer.start()
        with pytest.raises(httpx.TransportError):
            client.post("/jobs", content=slow_upload(), headers={
                "Content-Type": "multipart/form-data; boundary=ocrqboundary", "Idempotency-Key": key})
        killer.join()
    with cluster.client(api=1) as survivor:
        retried = survivor.post("/jobs", files={"file": (name, body)}, data={"output": "text"},
                                headers={"Idempotency-Key": key})
        assert retried.status_code == 202, retried.text
        assert wait_for_job(survivor, retried.json()["id"])["status"] == "succeeded"
    with database(cluster) as db:
        assert db.execute("SELECT id FROM jobs WHERE filename = %s", (name,)).fetchall() == [(retried.json()["id"],)]


def test_a_worker_host_killed_whole_has_its_pages_read_on_the_other_within_the_minute(cluster):
    """gpu-b holds pages and the scheduler's lease when every process on it is SIGKILLed at once."""
    cluster.engine_faults("delay", delay_s=8)  # every page stays in its worker's hands for 8 s at least
    with cluster.client(api=1) as client:
        reply = client.post("/jobs", files={"file": ("three.pdf", short_pdf(3))}, data={"output": "text"})
        assert reply.status_code == 202, reply.text
        job_id = reply.json()["id"]

        def held_by(host: str) -> list[str]:
            with database(cluster) as db:
                return [row[0] for row in db.execute(
                    "SELECT p.id FROM pages p JOIN leases l ON l.name = p.claimed_by "
                    "WHERE p.job_id = %s AND p.status = 'running' AND l.holder LIKE %s", (job_id, f"%@{host} %"))]

        deadline = time.monotonic() + 60
        while not (doomed := held_by("gpu-b")):
            assert time.monotonic() < deadline, "gpu-b never took a page"
            time.sleep(0.1)
        killed_at = time.monotonic()
        assert cluster.gpu_b.kill_all() >= 2
        cluster.clear_engine_faults()
        timeline = {"killed processes": "every process on gpu-b", "pages held by gpu-b": len(doomed)}
        while True:
            with database(cluster) as db:
                rows = db.execute(
                    "SELECT p.status, l.holder FROM pages p LEFT JOIN leases l ON l.name = p.claimed_by "
                    "WHERE p.id = ANY(%s)", (doomed,)).fetchall()
            taken_back = [s for s, holder in rows if s != "running" or not holder or "@gpu-b " not in holder]
            if taken_back and "kill -> a page of gpu-b's back in the queue (s)" not in timeline:
                timeline["kill -> a page of gpu-b's back in the queue (s)"] = round(time.monotonic() - killed_at, 1)
            if any(status == "running" and holder and "@gpu-a " in holder for status, holder in rows) or \
                    any(status == "succeeded" for status, _ in rows):
                timeline["kill -> a page of gpu-b's running on gpu-a (s)"] = round(time.monotonic() - killed_at, 1)
                break
            assert time.monotonic() - killed_at < 60, rows
            time.sleep(0.2)
        body = wait_for_job(client, job_id, timeout=120)
        timeline["kill -> job succeeded (s)"] = round(time.monotonic() - killed_at, 1)
    assert body["status"] == "succeeded" and body["pages_done"] == 3, body
    leading = [p.host.name for p in cluster.processes if hosts_cluster.LEADING in p.text()]
    assert leading == ["gpu-b", "gpu-a"], leading
    print(f"\nmany hosts, worker host killed: {json.dumps(timeline)}")
