"""Quantise the CPU engine's recogniser to int8, and write what the engine needs to do the same at load time.

NNCF's post-training quantisation, calibrated on the recogniser's own inputs as the engine feeds them while it
reads pages of bench/cpu_corpus.py made from another seed than the corpus the results are judged on (35). Only
convolutions are quantised (their 1x1 ones are two thirds of the recogniser's time, and run about twice as fast
in int8 with VNNI); the last layer, the attention and the depthwise convolutions stay as they were. What NNCF
changed is written to worker/engines/models/ as numbers (inference.quantised_recogniser puts them back into
rapidocr's ONNX model), not as a model file.

NNCF is not one of ocrq's dependencies; install it beside the venv for this script:

    python3 -m venv /tmp/nncf && /tmp/nncf/bin/pip install nncf==3.4.0
    .venv/bin/python bench/cpu_quantise.py --nncf /tmp/nncf [--seed 7 --pages 80]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu_corpus import generate
from common.documents import Limits, render_page
from worker.engines import inference
from worker.engines.cpu import CpuEngine

# Everything but the convolutions: the depthwise ones lost speed in int8, and the rest is the attention, the
# normalisations and the last layer, which the int8 runs on this CPU do not speed up.
KEPT_FLOAT = ["MatMul", "GroupConvolution", "Multiply", "Add", "ReduceMean", "Softmax", "Sigmoid", "Relu", "AvgPool",
              "MaxPool"]


def recogniser_inputs(corpus: Path, pages: list[dict]) -> tuple[list[np.ndarray], str]:
    """The batches the engine's (unquantised) recogniser is given while it reads these pages, and its model's
    path."""
    engine = CpuEngine(quantised=False, fast=False)
    session = engine._ocr.text_rec.session.session
    seen, run = [], session.run

    def recording(names, feed):
        seen.append(next(iter(feed.values())).copy())
        return run(names, feed)

    session.run = recording
    limits = Limits()
    for page in pages:
        engine.read([render_page(corpus / f"{page['name']}.png", 0, limits=limits).image])
    return seen, session.path


def changes(original, quantised) -> dict[str, np.ndarray]:
    """What NNCF did to the model, as arrays keyed by kind and place (inference.quantised_recogniser's format)."""
    before = {op.get_friendly_name(): op for op in original.get_ordered_ops()}
    out: dict[str, np.ndarray] = {}
    n = 0
    for op in quantised.get_ordered_ops():
        kind, name = op.get_type_name(), op.get_friendly_name()
        if kind == "Constant" and name in before and before[name].get_type_name() == "Constant":
            old, new = before[name].get_data(), op.get_data()
            if old.shape == new.shape and not np.array_equal(old, new):
                out[f"constant/{name}"] = new.copy()  # a bias NNCF corrected
        elif kind == "FakeQuantize":
            source = op.input_value(0)
            consumers = sorted(f"{target.get_node().get_friendly_name()}:{target.get_index()}"
                               for target in op.output(0).get_target_inputs())
            ranges = [np.asarray(value.get_node().get_data(), np.float32) for value in op.input_values()[1:]]
            if any(r.size != 1 for r in ranges):
                raise SystemExit(f"{name}: per-channel activation ranges are not supported")
            key = f"fq/{n}/{source.get_node().get_friendly_name()}:{source.get_index()}/{op.get_levels()}"
            out[key] = np.array([float(r.reshape(-1)[0]) for r in ranges], np.float32)
            out[f"{key}/consumers"] = np.array(consumers)
            n += 1
        elif kind == "Convolution" and op.input_value(1).get_node().get_type_name() == "Multiply":
            scale = op.input_value(1).get_node().input_value(1).get_node().get_data()
            out[f"weights/{name}"] = np.asarray(scale, np.float32).copy()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nncf", type=Path, required=True, help="a venv with nncf installed")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pages", type=int, default=80)
    parser.add_argument("--out", type=Path, default=inference.QUANTISED)
    args = parser.parse_args()
    sys.path += [str(p) for p in args.nncf.glob("lib/python3*/site-packages")]
    import nncf
    import openvino

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp)
        pages = [page for page in generate(corpus, seed=args.seed, pages=args.pages) if page["group"] != "real scan"]
        batches, path = recogniser_inputs(corpus, pages)
    print(f"{len(batches)} calibration batches from {len(pages)} pages (seed {args.seed})")
    core = openvino.Core()
    started = time.perf_counter()
    quantised = nncf.quantize(core.read_model(path), nncf.Dataset(batches), subset_size=len(batches),
                              preset=nncf.QuantizationPreset.MIXED,
                              ignored_scope=nncf.IgnoredScope(types=KEPT_FLOAT, validate=False))
    print(f"quantised in {time.perf_counter() - started:.0f} s")
    found = changes(core.read_model(path), quantised)
    digest = inference.file_sha256(Path(path))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, model_sha256=np.array(digest), **found)
    rebuilt = inference.quantised_recogniser(core.read_model(path), np.load(args.out))
    probe = batches[::7]
    ours, nncfs = (core.compile_model(inference._with_peaks(model), "CPU", inference._config(0))
                   for model in (rebuilt, quantised))
    same = all(np.array_equal(ours([x])[1], nncfs([x])[1]) for x in probe)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {sum(k.startswith('fq/') and '/consumers' not in k for k in found)} "
          f"activation quantisers); the rebuilt model gives NNCF's characters on {len(probe)} batches: {same}")


if __name__ == "__main__":
    main()
