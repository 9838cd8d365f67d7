"""Builds deploy/grafana/ocrq.json with Grafana's own typed builders (grafana-foundation-sdk, generated from
Grafana's dashboard schema): `python deploy/grafana/build.py > deploy/grafana/ocrq.json`. Every query reads a
metric of ocrq's /metrics (api/metrics.py, worker/metrics.py); tests/deploy/test_grafana_dashboard.py checks both."""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")


def query(expr: str, legend: str = "") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend or "__auto").datasource(DATASOURCE)


def series(title: str, unit: str, *queries: prometheus.Dataquery, width: int = 12) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).datasource(DATASOURCE).span(width).height(8)
    for ref, q in zip("ABCDEFGH", queries, strict=False):
        panel = panel.with_target(q.ref_id(ref))
    return panel


def figure(title: str, unit: str, expr: str, width: int = 4) -> stat.Panel:
    return (stat.Panel().title(title).unit(unit).datasource(DATASOURCE).span(width).height(4)
            .with_target(query(expr).ref_id("A")))


def row(title: str) -> dashboard.Row:
    return dashboard.Row(title)


def latency(metric: str, by: str, title: str) -> timeseries.Panel:
    return series(title, "s", *(
        query(f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket[5m])))",
              f"p{int(q * 100)} {{{{{by}}}}}")
        for q in (0.5, 0.95, 0.99)))


def build() -> dashboard.Dashboard:
    return (
        dashboard.Dashboard("ocrq").uid("ocrq").tags(["ocrq", "ocr"]).refresh("30s").time("now-6h", "now")
        .description("Queues, pages, engines and webhooks of an ocrq deployment, from its /metrics.")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_row(row("Now"))
        .with_panel(figure("Pages/s", "reqps", "sum(ocrq_pages_per_second)"))
        .with_panel(figure("Queued pages", "short", 'sum(ocrq_pages{status="queued"})'))
        .with_panel(figure("Oldest queued page", "s", "max(ocrq_oldest_queued_page_seconds)"))
        .with_panel(figure("Engines up", "short", "sum(ocrq_engine_up) or vector(0)"))
        .with_panel(figure("Webhooks pending", "short", 'sum(ocrq_webhook_deliveries{status="pending"}) or vector(0)'))
        .with_panel(figure("Jobs running", "short", 'sum(ocrq_jobs{status="running"})'))
        .with_row(row("Queues"))
        .with_panel(series("Queue depth by queue (lane and size bucket)", "short",
                           query("sum by (queue) (ocrq_queue_depth)", "{{queue}}")))
        .with_panel(series("Oldest queued page by lane", "s",
                           query("max by (lane) (ocrq_oldest_queued_page_seconds)", "{{lane}}")))
        .with_panel(latency("ocrq_page_queue_seconds", "lane", "Time in queue, by lane"))
        .with_panel(series("Pages by status", "short", query("sum by (status) (ocrq_pages)", "{{status}}")))
        .with_row(row("Pages"))
        .with_panel(series("Pages/s", "reqps", query("sum(ocrq_pages_per_second)", "finished"),
                           query("sum by (outcome) (rate(ocrq_pages_processed_total[5m]))", "{{outcome}}")))
        .with_panel(latency("ocrq_page_engine_seconds", "engine", "Engine time per page"))
        .with_panel(series("Failures by kind", "short",
                           query("sum by (kind) (increase(ocrq_engine_errors_total[5m]))", "{{kind}}"),
                           query('sum(increase(ocrq_pages_processed_total{outcome="failed"}[5m]))', "pages failed")))
        .with_panel(series("Jobs by status", "short", query("sum by (status) (ocrq_jobs)", "{{status}}")))
        .with_row(row("Engines"))
        .with_panel(series("Engine up", "short", query("ocrq_engine_up", "{{lane}} {{url}}")))
        .with_panel(series("KV cache in use", "percentunit",
                           query("ocrq_engine_kv_cache_usage_ratio", "{{lane}} {{url}}")))
        .with_panel(series("Requests in the engines", "short",
                           query("sum by (url) (ocrq_engine_requests_running)", "running {{url}}"),
                           query("sum by (url) (ocrq_engine_requests_waiting)", "waiting {{url}}")))
        .with_panel(series("Metrics sources up", "short", query("ocrq_metrics_source_up", "{{source}}")))
        .with_row(row("Webhooks"))
        .with_panel(series("Webhook deliveries by status", "short",
                           query("sum by (status) (ocrq_webhook_deliveries)", "{{status}}")))
        .with_panel(series("Webhook attempts by outcome", "short",
                           query("sum by (outcome) (ocrq_webhook_attempts)", "{{outcome}}")))
    )


def as_json() -> str:
    board = build().build()
    for number, panel in enumerate(board.panels, 1):  # the builders leave every id at 0
        panel.id_val = number
    return json.dumps(board, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(as_json(), end="")
