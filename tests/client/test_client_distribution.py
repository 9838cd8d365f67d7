"""The client's own distribution (clients/python): its files, run with nothing but its declared dependencies against
the real API, and the models it returns are the API's own classes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import ocrq.client
from api.routers import batches, jobs
from tests.conftest import KEY_A
from tests.formats.pages import one_column
from tests.support.stack import ROOT

PROJECT = ROOT / "clients" / "python"
SERVER_ONLY = ("fastapi", "starlette", "sqlalchemy", "celery", "redis", "boto3", "psycopg", "pydantic_settings",
               "PIL", "numpy", "uvicorn", "typer", "mcp")


def declared() -> dict:
    return tomllib.loads((PROJECT / "pyproject.toml").read_text())


def with_dependencies(requirements: list[str]) -> list[metadata.Distribution]:
    """The installed distributions these requirements need, transitively (extras left out)."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = Requirement(todo.pop())
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        if (name := canonicalize_name(requirement.name)) not in found:
            found[name] = metadata.distribution(requirement.name)
            todo += found[name].requires or []
    return list(found.values())


def lay_out(root: Path) -> tuple[Path, Path]:
    """The wheel's files as its force-include lists them, and a site of only its dependencies' top-level modules."""
    src, site = root / "src", root / "site"
    for source, target in declared()["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"].items():
        (src / target).parent.mkdir(parents=True, exist_ok=True)
        (src / target).write_bytes((PROJECT / source).resolve().read_bytes())
    site.mkdir()
    for dist in with_dependencies(declared()["project"]["dependencies"]):
        tops = {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")
                and not f.parts[0].endswith((".dist-info", ".egg-info", ".pth"))}
        for top in tops:
            if not (site / top).exists():
                (site / top).symlink_to(dist.locate_file(top))
    return src, site


def test_the_client_runs_with_only_its_declared_dependencies(api_url, tmp_path):
    src, site = lay_out(tmp_path)
    page = tmp_path / "page.png"
    buffer = io.BytesIO()
    one_column().save(buffer, "PNG")
    page.write_bytes(buffer.getvalue())
    code = f"""
import json, sys
sys.path[:0] = [{str(src)!r}, {str(site)!r}]
from ocrq import Client
with Client({api_url!r}, {KEY_A!r}) as client:
    job = client.submit({str(page)!r}, output="text")
    view = job.wait(timeout=120)
    print(json.dumps({{"status": view.status, "model": type(view).__module__ + "." + type(view).__name__,
                      "text": job.result("text"), "modules": sorted({{m.split(".")[0] for m in sys.modules}}),
                      "files": sorted({{m.__file__ for m in sys.modules.values() if getattr(m, "__file__", None)
                                       and m.__name__.split(".")[0] in ("ocrq", "common")}})}}))
"""
    # -I -S: no site-packages, no environment, no current folder: only the stdlib and the two folders above.
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["status"] == "succeeded" and "granite" in seen["text"]
    assert seen["model"] == "common.jobs.schemas.JobView"
    assert not set(SERVER_ONLY) & set(seen["modules"]), set(SERVER_ONLY) & set(seen["modules"])
    assert all(path.startswith(str(src)) for path in seen["files"]), seen["files"]


def test_the_clients_models_are_the_apis_response_models():
    served = {route.response_model for router in (jobs.router, batches.router) for route in router.routes
              if getattr(route, "response_model", None) is not None}
    returned = {ocrq.client.JobAccepted, ocrq.client.JobView, ocrq.client.JobList, ocrq.client.PageList,
                ocrq.client.JobSummary, ocrq.client.BatchAccepted, ocrq.client.BatchView, ocrq.client.BatchList}
    assert returned <= served, returned - served  # the very classes, not copies of the same shape
