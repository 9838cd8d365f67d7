"""Parameters across processes through CUDA IPC: the holder publishes a handle per tensor, readers map them.

Torch only (no vLLM), so `python -m ocrq_vllm_plugin.ipc_selfcheck` can try the mechanism on its own.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.multiprocessing.reductions import rebuild_cuda_tensor, reduce_tensor

from ocrq_vllm_plugin import holder

SAMPLE = 4096


def _fingerprint(tensor: torch.Tensor) -> float:
    """A cheap checksum of a parameter's first elements: equal in holder and reader iff both see the same bytes."""
    return float(tensor.detach().reshape(-1)[:SAMPLE].double().sum().item())


def _device_uuid() -> str:
    return str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)


def parameters_by_name(model: nn.Module) -> dict[str, nn.Parameter]:
    """Every parameter under every name, tied ones too.

    vLLM 0.29 on re-ties an lm_head that loaded equal to the input embeddings, after loading
    (process_weights_after_loading): the holder may then hold one tensor under two names where a reader,
    not yet past that step, still has two. Listing duplicates keeps both names on both sides.
    """
    return dict(model.named_parameters(remove_duplicate=False))


def export(model: nn.Module) -> dict:
    """Publish every parameter of the laid-out model through CUDA IPC; the model must live as long as readers."""
    torch.cuda.synchronize()
    tensors, fingerprints, total, seen = {}, {}, 0, set()
    for name, param in parameters_by_name(model).items():
        if not param.is_cuda:
            raise RuntimeError(f"parameter {name} is on {param.device}; only GPU weights can be shared")
        _rebuild, args = reduce_tensor(param.data)
        tensors[name] = args
        fingerprints[name] = _fingerprint(param)
        if param.data_ptr() not in seen:
            seen.add(param.data_ptr())
            total += param.numel() * param.element_size()
    me = holder.HolderId.of_this_process()
    payload = {
        "holder": me, "device_uuid": _device_uuid(), "tensors": tensors, "fingerprints": fingerprints,
        "bytes": total, "published_at": time.time(),
    }
    holder.publish(holder.shared_dir(), payload)
    return payload


def attach(model: nn.Module, payload: dict) -> int:
    """Point the model's parameters at the holder's tensors; returns the bytes now shared."""
    if payload["device_uuid"] != _device_uuid():
        raise RuntimeError("the weight holder is on another GPU; engines share weights only within one GPU")
    own = parameters_by_name(model)
    theirs = payload["tensors"]
    if set(own) != set(theirs):
        missing, extra = sorted(set(own) - set(theirs)), sorted(set(theirs) - set(own))
        raise RuntimeError(f"holder and reader models differ: missing {missing[:5]}, unexpected {extra[:5]}")
    shared, seen = 0, set()
    for name, param in own.items():
        tensor = rebuild_cuda_tensor(*theirs[name])
        if tensor.shape != param.shape or tensor.dtype != param.dtype:
            raise RuntimeError(
                f"{name}: holder has {tuple(tensor.shape)} {tensor.dtype}, this engine {tuple(param.shape)} "
                f"{param.dtype}; the engines must run the same model with the same options"
            )
        param.data = tensor
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            shared += tensor.numel() * tensor.element_size()
    for name, param in own.items():
        if _fingerprint(param) != payload["fingerprints"][name]:
            raise RuntimeError(f"{name} reads differently through CUDA IPC than in its holder")
    return shared
