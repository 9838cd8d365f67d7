"""The layout's rules, checked: imports run downhill (import-linter's contracts in pyproject.toml), and every
task and queue name is spelled once, in common/queue/names.py."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from common.queue import names

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("api", "cli", "common", "worker")
NAMES_MODULE = ROOT / "common" / "queue" / "names.py"
PUBLISH_MODULE = ROOT / "common" / "queue" / "publish.py"


def lint_imports(cwd: Path, *, pythonpath: Path) -> subprocess.CompletedProcess:
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"})


def test_imports_run_downhill():
    done = lint_imports(ROOT, pythonpath=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_the_contracts_catch_common_importing_worker(tmp_path):
    """The same contracts on a tree where common imports the workers: import-linter must refuse it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]\nroot_packages =\n" + "".join(f"    {p}\n" for p in config["root_packages"])]
    for n, contract in enumerate(config["contracts"]):
        lines.append(f"[importlinter:contract:{n}]\nname = {contract['name']}\ntype = {contract['type']}\n"
                     "source_modules =\n" + "".join(f"    {m}\n" for m in contract["source_modules"]) +
                     "forbidden_modules =\n" + "".join(f"    {m}\n" for m in contract["forbidden_modules"]))
    (tmp_path / ".importlinter").write_text("\n".join(lines))
    named = {m for contract in config["contracts"] for m in contract["source_modules"] + contract["forbidden_modules"]}
    for package in {*config["root_packages"], *named}:
        (tmp_path / package.replace(".", "/")).mkdir(parents=True, exist_ok=True)
        (tmp_path / package.replace(".", "/") / "__init__.py").write_text("")
    (tmp_path / "worker" / "pipeline.py").write_text("")
    (tmp_path / "common" / "offender.py").write_text("from worker import pipeline\n")
    done = lint_imports(tmp_path, pythonpath=tmp_path)
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout[-2000:]


def names_spelled_once() -> set[str]:
    """Every queue and task name common/queue/names.py defines, and the GPU tasks' prefix."""
    return {value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)}


def spellings(source: str, spelled: set[str]) -> list[tuple[int, str]]:
    """Where a module spells a task or queue name itself, or sends a task other than through common.queue."""
    found, tree = [], ast.parse(source)
    loggers = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger" for arg in node.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in loggers:
            if node.value in spelled or node.value.startswith((names.GPU_TASK_PREFIX, "ocrq.pages.", "ocrq.gpu.")):
                found.append((node.lineno, node.value))
        if isinstance(node, ast.Attribute) and node.attr == "send_task":
            found.append((node.lineno, "send_task"))
    return found


def test_task_and_queue_names_live_only_in_common_queue():
    spelled, offenders = names_spelled_once(), []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path in (NAMES_MODULE, PUBLISH_MODULE):
                continue
            offenders += [f"{path.relative_to(ROOT)}:{line}: {what}"
                          for line, what in spellings(path.read_text(), spelled)]
    assert offenders == []


def test_the_name_check_finds_a_literal_and_a_direct_send():
    source = ('log = logging.getLogger("ocrq.webhooks")\n'
              'app.send_task("ocrq.ocr_page", args=[1], queue="ocrq.pages.bulk")\n'
              '@task(name="ocrq.requeue_stale")\ndef f(): ...\n')
    assert {what for _, what in spellings(source, names_spelled_once())} == {
        "send_task", "ocrq.ocr_page", "ocrq.pages.bulk", "ocrq.requeue_stale"}
