"""vLLM model loaders that give the engines of one GPU a single copy of the weights.

`ocrq_holder` loads the weights as vLLM would (OCRQ_HOLDER_LOAD_FORMAT, default auto), lets vLLM lay them
out for its kernels, then publishes a CUDA IPC handle for every parameter. `ocrq_attach` builds the same
model, points each parameter at the holder's memory and frees its own, so it adds its KV cache and
runtime buffers only. Buffers (rotary tables, KV scales) stay per engine: they are small and some are
written at run time. An attached engine exits as soon as its holder is gone.
"""

from __future__ import annotations

import dataclasses
import os

import torch
from torch import nn
from vllm.config import ModelConfig, VllmConfig
from vllm.model_executor.model_loader import BaseModelLoader, get_model_loader, register_model_loader
from vllm.model_executor.model_loader.utils import initialize_model, process_weights_after_loading
from vllm.utils.torch_utils import set_default_torch_dtype

from ocrq_vllm_plugin import holder, plugin_log, status
from ocrq_vllm_plugin.env import current_env
from ocrq_vllm_plugin.weights_ipc import attach, export

HOLDER_FORMAT = "ocrq_holder"
ATTACH_FORMAT = "ocrq_attach"

log = plugin_log()


def _record_kv_cache_bytes() -> None:
    """Note the KV cache size vLLM settles on in this engine's state file (reported at /ocrq/weights)."""
    from vllm.v1.worker import gpu_worker

    original = gpu_worker.Worker.determine_available_memory
    if getattr(original, "_ocrq_records", False):
        return

    def determine_available_memory(self) -> int:
        available = original(self)
        status.write_state(kv_cache_bytes=int(available))
        return available

    determine_available_memory._ocrq_records = True
    gpu_worker.Worker.determine_available_memory = determine_available_memory


@register_model_loader(HOLDER_FORMAT)
class HolderLoader(BaseModelLoader):
    """Loads the weights with the load format in OCRQ_HOLDER_LOAD_FORMAT, then exports them."""

    def __init__(self, load_config) -> None:
        super().__init__(load_config)
        inner_format = current_env().holder_load_format
        self.inner = get_model_loader(dataclasses.replace(load_config, load_format=inner_format))

    def download_model(self, model_config: ModelConfig) -> None:
        self.inner.download_model(model_config)

    def load_weights(self, model: nn.Module, model_config: ModelConfig) -> None:
        self.inner.load_weights(model, model_config)

    def load_model(self, vllm_config: VllmConfig, model_config: ModelConfig, prefix: str = "") -> nn.Module:
        _refuse_quantized(model_config)
        _record_kv_cache_bytes()
        holder.clear(holder.shared_dir())
        model = self.inner.load_model(vllm_config=vllm_config, model_config=model_config, prefix=prefix)
        payload = export(model)
        status.write_state(
            role="holder", engine_pid=os.getpid(), holder_pid=os.getpid(), holder=dataclasses.asdict(payload["holder"]),
            shared_bytes=payload["bytes"], weight_bytes_allocated=payload["bytes"], tensors=len(payload["tensors"]),
            state="ok",
        )
        log.info("ocrq shared weights: holder exported %d tensors, %.3f GiB, in %s",
                 len(payload["tensors"]), payload["bytes"] / 2**30, holder.shared_dir())
        return model


@register_model_loader(ATTACH_FORMAT)
class AttachLoader(BaseModelLoader):
    """Builds the model and maps the holder's parameters in place of its own; loads nothing from disk."""

    def download_model(self, model_config: ModelConfig) -> None:
        pass

    def load_weights(self, model: nn.Module, model_config: ModelConfig) -> None:
        attach(model, self._wait())

    def _wait(self) -> dict:
        return holder.wait_for_holder(holder.shared_dir(), timeout_s=current_env().attach_timeout_s)

    def load_model(self, vllm_config: VllmConfig, model_config: ModelConfig, prefix: str = "") -> nn.Module:
        _refuse_quantized(model_config)
        _record_kv_cache_bytes()
        payload = self._wait()
        device = torch.device(vllm_config.load_config.device or vllm_config.device_config.device)
        free_before, _ = torch.cuda.mem_get_info()
        allocated_before = torch.cuda.memory_allocated()
        with set_default_torch_dtype(model_config.dtype):
            with device:
                model = initialize_model(vllm_config=vllm_config, model_config=model_config, prefix=prefix)
            shared = attach(model, payload)
            # The parameters this engine allocated while building the model are unreferenced now.
            torch.cuda.empty_cache()
            # Unquantized layers do no re-layout here; attention modules set their own per-engine scales.
            process_weights_after_loading(model, model_config, device)
        allocated = torch.cuda.memory_allocated()
        free_after, _ = torch.cuda.mem_get_info()
        holder.HolderWatch(payload["holder"], on_lost=_holder_lost).start()
        status.write_state(
            role="attached", engine_pid=os.getpid(), holder_pid=payload["holder"].pid,
            holder=dataclasses.asdict(payload["holder"]), shared_bytes=shared,
            weight_bytes_allocated=allocated - allocated_before,
            tensors=len(payload["tensors"]), state="ok",
        )
        log.info(
            "ocrq shared weights: attached %d tensors, %.3f GiB, from holder pid %d; device free %.2f -> %.2f GiB",
            len(payload["tensors"]), shared / 2**30, payload["holder"].pid, free_before / 2**30, free_after / 2**30,
        )
        return model.eval()


def _refuse_quantized(model_config: ModelConfig) -> None:
    if model_config.quantization:
        raise ValueError(
            "ocrq shared weights support unquantized models only: quantized layers re-lay their weights "
            f"after loading in ways a reader must not repeat (quantization={model_config.quantization})"
        )


def _holder_lost() -> None:
    status.write_state(state="holder_lost")
    log.error("ocrq shared weights: the holder engine is gone and its weights with it; exiting")
    os._exit(holder.HOLDER_LOST_EXIT)
