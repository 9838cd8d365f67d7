"""The `ocrq` command line: thin over the services."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from cli.engine import engine
from common.settings import get_settings

app = typer.Typer(help="ocrq: an asynchronous OCR job service.", no_args_is_help=True)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
webhooks_app = typer.Typer(help="Webhook signing secrets.", no_args_is_help=True)
app.add_typer(webhooks_app, name="webhooks")

# Without --url or --key, cli.connect reads OCRQ_URL and OCRQ_API_KEY, else what `ocrq serve` recorded.
UrlOpt = Annotated[str | None, typer.Option(
    help="Base URL of the ocrq API (default: OCRQ_URL, else the one `ocrq serve` recorded, else :8000).")]
FormatOpt = Annotated[str, typer.Option("--output", "--format",
                                        help="markdown, text, json, hocr, alto, page (a zip of PAGE XML), pdf "
                                             "(a searchable PDF), csv or xlsx (the tables); pdf, page, csv and xlsx "
                                             "are saved with --out.")]
KeyOpt = Annotated[str | None, typer.Option(help="API key (default: OCRQ_API_KEY, else the one `serve` saved).")]


def _loopback_only_if_open(host: str) -> None:
    settings = get_settings()
    if settings.auth_disabled and not _is_loopback(host):
        raise typer.BadParameter("OCRQ_AUTH_DISABLED is allowed only when binding to a loopback address")


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(host: str = "127.0.0.1", port: int = 8000,
          verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Every log line at the console too, not "
                                                "only in OCRQ_HOME/logs.")] = False) -> None:
    """Run API and worker together on the embedded default (or whatever OCRQ_* says)."""
    from cli.serve import serve as run

    _loopback_only_if_open(host)
    run(get_settings(), host=host, port=port, verbose=verbose)


@app.command()
def api(host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> None:
    """Run the HTTP API alone."""
    import uvicorn

    _loopback_only_if_open(host)
    from common.log_format import logging_config

    settings = get_settings()
    # log_config, not our own setup alone: with --workers uvicorn applies it in each process it spawns.
    uvicorn.run("api.app:create_app", factory=True, host=host, port=port, workers=workers,
                log_level=settings.log_level.lower(), log_config=logging_config(settings))


@app.command()
def worker(
    queues: Annotated[str | None, typer.Option(help="Comma-separated queues (default: control and CPU pages).")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Worker processes.")] = None,
    beat: Annotated[bool, typer.Option(
        help="Take part in running the sweepers' schedule: every worker may, a database lease lets one at a time.",
    )] = True,
    pool: Annotated[str, typer.Option(
        help="prefork (time limits, crash isolation), threads (with --gpu: one process whose threads each free "
             "their page's slot as it comes back; no time limits) or solo (one task inline).",
    )] = "prefork",
    gpu: Annotated[bool, typer.Option(help="Read pages through the vLLM engines, in same-size batches.")] = False,
    lane: Annotated[Literal["all", "interactive", "bulk"],
                    typer.Option(help="With --gpu: serve only this priority lane, through its engines.")] = "all",
) -> None:
    """Run a Celery worker."""
    from worker.metrics_dir import prepare_multiprocess

    if lane != "all" and not gpu:
        raise typer.BadParameter("--lane needs --gpu", param_hint="--lane")
    settings = get_settings()
    if settings.supervisor_pid:
        from common.lifeline import end_with_parent

        end_with_parent(settings.supervisor_pid)
    # Prometheus' multiprocess mode is chosen when prometheus_client is imported: the folder goes first.
    prepare_multiprocess(settings)
    from worker.engines.needs import MissingPackages
    from worker.run import run_worker

    try:
        run_worker(settings, queues=queues.split(",") if queues else None,
                   concurrency=concurrency or settings.worker_concurrency, beat=beat, pool=pool,
                   gpu=gpu, lane=lane)
    except MissingPackages as exc:
        typer.echo(f"ocrq worker: {exc}", err=True)
        raise typer.Exit(2) from exc


app.command("engine")(engine)


@app.command()
def migrate() -> None:
    """Bring the database schema up to date (Alembic)."""
    from common import migrate as migrations

    migrations.upgrade(get_settings().resolved_database_url)
    typer.echo("database is at the latest revision")


@app.command()
def submit(
    files: Annotated[list[Path], typer.Argument(help="Files, folders or globs.")],
    wait: bool = False,
    out: Annotated[Path | None, typer.Option(help="Write each result into this folder.")] = None,
    pages: str | None = None,
    output: FormatOpt = "markdown",
    priority: str = "interactive",
    url: UrlOpt = None,
    key: KeyOpt = None,
) -> None:
    """Submit documents; with --wait, show progress and print or save the results."""
    from cli import submit as submitting
    from cli.connect import connect, reported

    client = connect(url, key)
    with reported(client):
        ok = submitting.run(client, files=files, wait=wait, out=out,
                            options={"pages": pages, "output": output, "priority": priority})
    raise typer.Exit(0 if ok else 1)


@app.command()
def ingest(
    input_prefix: Annotated[str, typer.Argument(help="s3://bucket/prefix/ to read every document under.")],
    out: Annotated[str, typer.Option(help="s3://bucket/prefix/ to write each result under.")],
    include: Annotated[list[str] | None, typer.Option(help="Only keys matching this pattern (repeatable).")] = None,
    exclude: Annotated[list[str] | None, typer.Option(help="Skip keys matching this pattern (repeatable).")] = None,
    output: str = "markdown",
    priority: str = "bulk",
    profile: Annotated[str | None, typer.Option(help="A named S3 source profile of the service.")] = None,
    retry_failed: Annotated[bool, typer.Option(help="Redo objects whose earlier result is a failure.")] = False,
    wait: bool = False,
    url: UrlOpt = None,
    key: KeyOpt = None,
) -> None:
    """Read every document under an S3 prefix; prints the batch id, and with --wait follows it to the end."""
    from cli import ingest as ingesting
    from cli.connect import connect, reported

    body = {"input_prefix": input_prefix, "output_prefix": out, "include": include or None,
            "exclude": exclude or None, "output": output, "priority": priority, "source_profile": profile,
            "retry_failed": retry_failed}
    client = connect(url, key)
    with reported(client):
        ok = ingesting.run(client, body=body, wait=wait)
    raise typer.Exit(0 if ok else 1)


@app.command()
def status(job_id: str, url: UrlOpt = None, key: KeyOpt = None) -> None:
    """Show a job's status as JSON."""
    import json

    from cli.connect import connect, reported

    client = connect(url, key)
    with reported(client, job_id):
        typer.echo(json.dumps(client.job(job_id).get().model_dump(mode="json"), indent=2))


@app.command("jobs")
def jobs_list(status: Annotated[list[str] | None, typer.Option(help="Only jobs in this status (repeatable).")] = None,
              limit: Annotated[int, typer.Option(min=1, max=200, help="How many, newest first.")] = 20,
              as_json: Annotated[bool, typer.Option("--json", help="Print the API's answer as JSON.")] = False,
              url: UrlOpt = None, key: KeyOpt = None) -> None:
    """List your jobs, newest first."""
    import json

    from rich.console import Console

    from cli.connect import connect, reported
    from cli.manage import jobs_table

    client = connect(url, key)
    with reported(client, "listing jobs"):
        listing = client.jobs.page(status=status, limit=limit)
    if as_json:
        typer.echo(json.dumps(listing.model_dump(mode="json"), indent=2))
    else:
        Console().print(jobs_table(listing))


@app.command()
def watch(job_id: str, url: UrlOpt = None, key: KeyOpt = None) -> None:
    """Follow a job's pages live (its event stream) with a progress bar; exit 0 if it succeeded."""
    from rich.console import Console

    from cli.connect import connect, reported
    from cli.manage import watch as follow

    console = Console(stderr=True)
    client = connect(url, key)
    with reported(client, job_id):
        status = follow(client, job_id, console)
    typer.echo(f"{job_id} {status}")
    raise typer.Exit(0 if status == "succeeded" else 1)


@app.command()
def erase(job_id: str, url: UrlOpt = None, key: KeyOpt = None) -> None:
    """Erase a job now: its document, text and results are deleted; a tombstone with its counts remains."""
    from cli.connect import connect, reported

    client = connect(url, key)
    job = client.job(job_id)
    with reported(client, job_id):
        job.erase()
    done = not job.erase_pending
    typer.echo(f"{job_id} erased" if done else f"{job_id} erased; its stored files go once storage answers again")


@app.command()
def trace(job_id: str) -> None:
    """Print a job's timeline from the spans in OCRQ_TRACE_FILE (docs/operating/observability.md)."""
    from cli.trace import job_spans, timeline

    path = get_settings().trace_file
    if path is None or not path.is_file():
        typer.echo("error: no trace file: start ocrq with OCRQ_TRACE_FILE=PATH to record traces there", err=True)
        raise typer.Exit(2)
    lines = timeline(job_spans(path, job_id))
    if not lines:
        typer.echo(f"error: no span of job {job_id} in {path}", err=True)
        raise typer.Exit(1)
    typer.echo("\n".join(lines))


@app.command()
def result(job_id: str, format: Annotated[str | None, typer.Option(
               help="markdown, text, json, hocr, alto, page, pdf, csv or xlsx (default: the job's output)")] = None,
           url: UrlOpt = None, key: KeyOpt = None,
           out: Annotated[Path | None, typer.Option(help="Write the result to this file.")] = None) -> None:
    """Print a finished job's result (--format pdf, page, csv or xlsx: to --out FILE or a redirected stdout)."""
    from cli.connect import connect, reported
    from cli.submit import BINARY

    if not out and format in BINARY and sys.stdout.isatty():
        typer.echo(f"error: a {format} result is not written to a terminal; give --out FILE or redirect stdout",
                   err=True)
        raise typer.Exit(2)
    client = connect(url, key)
    with reported(client, job_id):
        if out:
            client.job(job_id).save(out, format)
        else:
            sys.stdout.buffer.write(client.job(job_id).content(format))
            sys.stdout.flush()


@app.command("mcp")
def mcp_stdio(url: UrlOpt = None, key: KeyOpt = None) -> None:
    """Run ocrq's MCP server on stdio for an agent that starts it (tools: submit, wait, result, list_jobs)."""
    from cli.connect import default_key, default_url
    from ocrq.mcp_server import stdio_server

    stdio_server(url=(url or default_url()).rstrip("/"), key=key or default_key()).run("stdio")


@app.command()
def bench(
    sample: Annotated[Path, typer.Argument(help="The document to submit over and over.", exists=True, dir_okay=False)],
    copies: Annotated[int, typer.Option("--copies", "-n", min=1, help="How many jobs to submit.")] = 10,
    priority: str = "bulk",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    url: UrlOpt = None,
    key: KeyOpt = None,
) -> None:
    """Measure a running server: submit N copies of SAMPLE, wait for all, report pages per second."""
    import json

    from cli import bench as benchmark
    from cli.connect import connect, reported

    client = connect(url, key)
    with reported(client):
        report = benchmark.run(client, sample=sample, copies=copies, options={"priority": priority, "output": "text"})
    typer.echo(json.dumps(report.as_dict()) if as_json else report.summary())
    raise typer.Exit(1 if report.jobs_failed or report.pages_failed else 0)


@keys_app.command("create")
def keys_create(tenant: Annotated[str, typer.Option(help="Tenant the key belongs to.")],
                name: str = "default") -> None:
    """Create a key; it is printed once on stdout and stored only as a digest."""
    from common.db import Database
    from common.tenancy import keys

    db = Database(get_settings().resolved_database_url)
    with db.session() as session:
        _, plain = keys.create_key(session, tenant_id=tenant, name=name)
    typer.echo(plain)


@keys_app.command("list")
def keys_list(tenant: str | None = None) -> None:
    """List keys (never the keys themselves)."""
    from common.db import Database
    from common.tenancy import keys

    db = Database(get_settings().resolved_database_url)
    with db.session() as session:
        for row in keys.list_keys(session, tenant_id=tenant):
            state = "revoked" if row.revoked else "active"
            typer.echo(f"{row.id}\t{row.tenant_id}\t{row.name}\t{row.prefix}…\t{state}\t{row.created_at:%Y-%m-%d}"
                       f"\t{row.last_used_at or '-'}")


@keys_app.command("revoke")
def keys_revoke(key_id: str) -> None:
    """Revoke a key by its id (from `ocrq keys list`)."""
    from common.db import Database
    from common.tenancy import keys

    db = Database(get_settings().resolved_database_url)
    with db.session() as session:
        if not keys.revoke(session, key_id=key_id):
            typer.echo(f"no key {key_id}", err=True)
            raise typer.Exit(1)
    typer.echo(f"revoked {key_id}")



@webhooks_app.command("secret")
def webhooks_secret(tenant: Annotated[str, typer.Option(help="Tenant whose secret to show.")],
                    rotate: Annotated[bool, typer.Option(help="Make a new secret; the old one keeps signing "
                                                         "for OCRQ_WEBHOOK_ROTATION_OVERLAP_S.")] = False) -> None:
    """Print the tenant's webhook signing secret (whsec_…), creating it on first use."""
    from common.db import Database
    from common.webhooks import secrets as webhook_secrets

    settings = get_settings()
    db = Database(settings.resolved_database_url)
    with db.session() as session:
        if rotate:
            row = webhook_secrets.rotate(session, tenant_id=tenant, overlap_s=settings.webhook_rotation_overlap_s)
        else:
            row = webhook_secrets.get_or_create(session, tenant_id=tenant)
    typer.echo(row.current)
    if rotate:
        typer.echo(f"the previous secret keeps signing until {row.previous_until:%Y-%m-%d %H:%M} UTC", err=True)


def main() -> None:
    from common.log_format import configure_logging

    configure_logging(get_settings())
    app()


if __name__ == "__main__":
    main()
