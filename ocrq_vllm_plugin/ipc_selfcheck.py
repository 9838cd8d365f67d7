"""On a GPU: one process exports a model's parameters, another maps them; memory, equality, and holder loss.

    python -m ocrq_vllm_plugin.ipc_selfcheck          # prints one JSON line

The reader must add no weight memory, compute exactly what the holder computes, and exit with
HOLDER_LOST_EXIT soon after the holder is killed. The holder's last layer shares its first layer's weight
(as vLLM 0.29 on re-ties an lm_head equal to the embeddings after loading); the reader's does not, yet.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from ocrq_vllm_plugin.env import SHARED_DIR_ENV
from ocrq_vllm_plugin.holder import HOLDER_LOST_EXIT

LAYERS, WIDTH = 16, 4096  # 16 x 4096^2 bf16 = 512 MiB of weights


def _model(seed: int):
    import torch

    torch.manual_seed(seed)
    with torch.device("cuda"):
        return torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, dtype=torch.bfloat16) for _ in range(LAYERS)])


def _output_sum(model) -> float:
    import torch

    torch.manual_seed(7)
    x = torch.randn(8, WIDTH, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        return float(model(x).float().sum().item())


def holder_main() -> None:
    from ocrq_vllm_plugin.weights_ipc import export

    model = _model(seed=1)
    model[-1].weight = model[0].weight
    payload = export(model)
    print(json.dumps({"bytes": payload["bytes"], "output": _output_sum(model)}), flush=True)
    signal.pause()


def reader_main() -> None:
    import torch

    from ocrq_vllm_plugin import holder
    from ocrq_vllm_plugin.weights_ipc import attach

    payload = holder.wait_for_holder(holder.shared_dir(), timeout_s=60)
    start = torch.cuda.memory_allocated()
    model = _model(seed=2)
    shared = attach(model, payload)
    torch.cuda.empty_cache()
    report = {"shared": shared, "allocated_after_attach": torch.cuda.memory_allocated() - start,
              "output": _output_sum(model)}
    print(json.dumps(report), flush=True)

    def lost() -> None:
        print(json.dumps({"holder_lost_at": time.time()}), flush=True)
        os._exit(HOLDER_LOST_EXIT)

    holder.HolderWatch(payload["holder"], on_lost=lost).start()
    while True:
        _output_sum(model)  # keep reading the shared weights until the holder goes
        time.sleep(0.05)


def main() -> int:
    with tempfile.TemporaryDirectory() as directory:
        env = {**os.environ, SHARED_DIR_ENV: directory}
        cmd = [sys.executable, "-m", "ocrq_vllm_plugin.ipc_selfcheck"]
        holder_proc = subprocess.Popen([*cmd, "--holder"], env=env, stdout=subprocess.PIPE, text=True)
        held = json.loads(holder_proc.stdout.readline())
        reader = subprocess.Popen([*cmd, "--reader"], env=env, stdout=subprocess.PIPE, text=True)
        read = json.loads(reader.stdout.readline())
        killed_at = time.time()
        holder_proc.kill()
        holder_proc.wait()
        try:
            code = reader.wait(timeout=30)
        except subprocess.TimeoutExpired:
            reader.kill()
            code = None
        tail = reader.stdout.read().strip().splitlines()
        lost_at = json.loads(tail[-1]).get("holder_lost_at") if tail else None
    result = {
        "check": "cuda_ipc_weights", "weight_bytes": held["bytes"], "shared_bytes": read["shared"],
        "reader_allocated_bytes": read["allocated_after_attach"], "same_output": held["output"] == read["output"],
        "reader_exit_after_holder_kill": code, "reader_exit_s": round(lost_at - killed_at, 3) if lost_at else None,
    }
    print(json.dumps(result))
    ok = result["same_output"] and result["shared_bytes"] == held["bytes"] and code == HOLDER_LOST_EXIT
    return 0 if ok else 1


if __name__ == "__main__":
    if "--holder" in sys.argv:
        holder_main()
    elif "--reader" in sys.argv:
        reader_main()
    else:
        sys.exit(main())
