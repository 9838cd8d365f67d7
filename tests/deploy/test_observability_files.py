"""deploy/prometheus/alerts.yml through Prometheus' promtool, and deploy/grafana/ocrq.json through Grafana's typed
dashboard models; both read only metrics that ocrq's /metrics exposes."""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard

from tests.support.stack import ROOT

PROMETHEUS = ROOT / "deploy" / "prometheus"
GRAFANA = ROOT / "deploy" / "grafana"
METRIC = re.compile(r"\bocrq_[a-z_]+\b")


def exposed_metrics() -> set[str]:
    """Sample names of ocrq's collectors: gauges as named, counters with _total, histograms' _bucket/_count/_sum."""
    source = (ROOT / "api" / "metrics.py").read_text() + (ROOT / "worker" / "metrics.py").read_text()
    names = set(re.findall(r'GaugeMetricFamily\(\s*"(ocrq_[a-z_]+)"', source))
    names |= set(re.findall(r'_by_label\(\s*"(ocrq_[a-z_]+)"', source))
    names |= {f"{n}_total" for n in re.findall(r'Counter\(\s*"(ocrq_[a-z_]+)"', source)}
    histograms = re.findall(r'Histogram\(\s*"(ocrq_[a-z_]+)"', source)
    names |= {f"{n}{suffix}" for n in histograms for suffix in ("_bucket", "_count", "_sum")}
    return names


def test_the_alert_rules_pass_promtool_and_fire_where_they_should():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package `prometheus`; ./run test installs it as root)")
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        ran = subprocess.run([promtool, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    used = set(METRIC.findall((PROMETHEUS / "alerts.yml").read_text()))
    assert used and used <= exposed_metrics(), used - exposed_metrics()


def test_the_dashboard_is_grafanas_builders_output_and_reads_real_metrics():
    text = (GRAFANA / "ocrq.json").read_text()
    assert text == runpy.run_path(str(GRAFANA / "build.py"))["as_json"](), "run deploy/grafana/build.py again"
    board = json.loads(text)
    loaded = Dashboard.from_json(board)
    assert loaded.title == "ocrq" and len(loaded.panels) == len(board["panels"])
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert all(t["refId"] and t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used <= exposed_metrics(), used - exposed_metrics()
    for wanted in ("ocrq_queue_depth", "ocrq_oldest_queued_page_seconds", "ocrq_pages_per_second",
                   "ocrq_page_engine_seconds_bucket", "ocrq_engine_errors_total", "ocrq_engine_up",
                   "ocrq_engine_kv_cache_usage_ratio", "ocrq_webhook_deliveries"):
        assert wanted in used, wanted
