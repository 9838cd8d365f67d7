"""bench/soak.py's verdict can fail: its tally counts lost and duplicate work from plain rows."""

from __future__ import annotations

from collections import Counter

from bench.soak import tally

EXPECTED = {"j1": ["alpha0"], "j2": ["bravo1", "delta2"]}


def rows(**changes):
    jobs = [{"id": "j1", "status": "succeeded"}, {"id": "j2", "status": "succeeded"}]
    pages = [{"id": "p1", "job_id": "j1", "index": 0, "status": "succeeded", "text": "alpha0", "attempts": 1},
             {"id": "p2", "job_id": "j2", "index": 0, "status": "succeeded", "text": "bravo1", "attempts": 2},
             {"id": "p3", "job_id": "j2", "index": 1, "status": "succeeded", "text": "delta2", "attempts": 1}]
    events = [{"job_id": j, "event_type": "job.succeeded", "status": "delivered"} for j in ("j1", "j2")]
    received = [{"job_id": "j1", "webhook_id": "msg_1"}, {"job_id": "j2", "webhook_id": "msg_2"}]
    values = {"jobs": jobs, "pages": pages, "events": events, "received": received,
              "writes": Counter({"p1": 1, "p2": 1, "p3": 1})} | changes
    return tally(expected=EXPECTED, **values)


def test_a_clean_run_passes():
    counts = rows()
    assert counts["ok"] and counts["lost"] == 0 and counts["duplicate"] == 0
    assert (counts["jobs"], counts["pages"], counts["attempts"]) == (2, 3, {"1": 2, "2": 1})


def test_lost_work_fails_the_verdict():
    failed = rows(pages=[{"id": "p1", "job_id": "j1", "index": 0, "status": "failed", "text": None, "attempts": 3},
                         {"id": "p2", "job_id": "j2", "index": 0, "status": "succeeded", "text": "bravo1",
                          "attempts": 1}])
    assert failed["lost_pages"] == 2 and not failed["ok"]  # p1 failed, and j2's second page has no row
    unfinished = rows(jobs=[{"id": "j1", "status": "running"}, {"id": "j2", "status": "succeeded"}])
    assert unfinished["lost_jobs"] == 1 and not unfinished["ok"]
    no_event = rows(received=[{"job_id": "j1", "webhook_id": "msg_1"}])
    assert no_event["lost_events"] == 1 and not no_event["ok"]


def test_duplicate_work_fails_the_verdict_and_a_redelivery_does_not():
    twice = rows(writes=Counter({"p1": 2, "p2": 1, "p3": 1}))
    assert twice["duplicate_result_writes"] == 1 and not twice["ok"]
    two_events = rows(received=[{"job_id": "j1", "webhook_id": "msg_1"}, {"job_id": "j1", "webhook_id": "msg_9"},
                                {"job_id": "j2", "webhook_id": "msg_2"}])
    assert two_events["duplicate_events_received"] == 1 and not two_events["ok"]
    redelivered = rows(received=[{"job_id": "j1", "webhook_id": "msg_1"}, {"job_id": "j1", "webhook_id": "msg_1"},
                                 {"job_id": "j2", "webhook_id": "msg_2"}])
    assert redelivered["redelivered_same_event"] == 1 and redelivered["ok"]


def test_a_wrong_reading_fails_the_verdict():
    pages = [{"id": "p1", "job_id": "j1", "index": 0, "status": "succeeded", "text": "alpha", "attempts": 1},
             {"id": "p2", "job_id": "j2", "index": 0, "status": "succeeded", "text": "bravo1", "attempts": 1},
             {"id": "p3", "job_id": "j2", "index": 1, "status": "succeeded", "text": "delta2", "attempts": 1}]
    assert not rows(pages=pages)["ok"]
    split = [dict(pages[0], text="alpha\n\n0"), *pages[1:]]  # the engine broke the word in two lines
    assert rows(pages=split)["ok"]
