"""Build a LightOnOCR-2-1B model directory without the hub: public configs, Qwen tokenizer, random weights.

    python bench/gpu_model_dir.py --out DIR --tiktoken qwen.tiktoken        # configs + tokenizer.json
    python bench/gpu_model_dir.py --out DIR --tokenizer-json tokenizer.json --weights   # + model.safetensors

The weights are random (normal, std 0.02; norms at 1) but real bf16 safetensors under the checkpoint's
own names, so vLLM's ordinary loader (mmap of model.safetensors) runs, not only load_format=dummy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

CONFIG_FILES = ("config.json", "generation_config.json", "processor_config.json", "tokenizer_config.json")
DEFAULT_CONFIGS = Path(__file__).resolve().parents[2] / "shared" / "gpu" / "lightonocr-2-1b"

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = (  # ids from 151643 on, in this order
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
    "</tool_response>", "<think>", "</think>",
)
TOKENIZER_CHECKS = {"<|image_pad|>": 151655, "<|im_end|>": 151645, "<|endoftext|>": 151643}


def copy_configs(*, src: Path, out: Path) -> None:
    """Copy the public config files into the model directory."""
    out.mkdir(parents=True, exist_ok=True)
    for name in CONFIG_FILES:
        shutil.copyfile(src / name, out / name)


def build_tokenizer_json(*, tiktoken_path: Path, out: Path) -> Path:
    """Write tokenizer.json from Qwen's BPE ranks (dashscope's qwen.tiktoken) and check known ids."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    converter = TikTokenConverter(
        vocab_file=str(tiktoken_path), pattern=QWEN2_PATTERN, extra_special_tokens=SPECIAL_TOKENS
    )
    tokenizer = converter.converted()
    target = out / "tokenizer.json"
    tokenizer.save(str(target))
    check_tokenizer(target)
    return target


def check_tokenizer(path: Path) -> None:
    """Fail unless the tokenizer maps the special tokens and 'Hello world' to Qwen's ids."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    for token, expected in TOKENIZER_CHECKS.items():
        got = tokenizer.token_to_id(token)
        if got != expected:
            raise SystemExit(f"tokenizer: {token} is {got}, expected {expected}")
    ids = tokenizer.encode("Hello world", add_special_tokens=False).ids
    if ids != [9707, 1879]:
        raise SystemExit(f"tokenizer: 'Hello world' encodes as {ids}, expected [9707, 1879]")


def weight_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a LightOnOCR checkpoint, by its name in the hub's model.safetensors."""
    vis, txt = config["vision_config"], config["text_config"]
    vh, vi, patch = vis["hidden_size"], vis["intermediate_size"], vis["patch_size"]
    th, ti, hd = txt["hidden_size"], txt["intermediate_size"], txt["head_dim"]
    nq, nkv = txt["num_attention_heads"], txt["num_key_value_heads"]
    merge = config["spatial_merge_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "model.vision_encoder.patch_conv.weight": (vh, vis["num_channels"], patch, patch),
        "model.vision_encoder.ln_pre.weight": (vh,),
        "model.vision_projection.norm.weight": (vh,),
        "model.vision_projection.patch_merger.merging_layer.weight": (vh, vh * merge * merge),
        "model.vision_projection.linear_1.weight": (th, vh),
        "model.vision_projection.linear_2.weight": (th, th),
        "model.language_model.embed_tokens.weight": (txt["vocab_size"], th),
        "model.language_model.norm.weight": (th,),
    }
    for i in range(vis["num_hidden_layers"]):
        p = f"model.vision_encoder.transformer.layers.{i}."
        shapes[p + "attention_norm.weight"] = (vh,)
        shapes[p + "ffn_norm.weight"] = (vh,)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + f"attention.{proj}.weight"] = (vh, vh)
        shapes[p + "feed_forward.gate_proj.weight"] = (vi, vh)
        shapes[p + "feed_forward.up_proj.weight"] = (vi, vh)
        shapes[p + "feed_forward.down_proj.weight"] = (vh, vi)
    for i in range(txt["num_hidden_layers"]):
        p = f"model.language_model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (th,)
        shapes[p + "post_attention_layernorm.weight"] = (th,)
        shapes[p + "self_attn.q_proj.weight"] = (nq * hd, th)
        shapes[p + "self_attn.k_proj.weight"] = (nkv * hd, th)
        shapes[p + "self_attn.v_proj.weight"] = (nkv * hd, th)
        shapes[p + "self_attn.o_proj.weight"] = (th, nq * hd)
        shapes[p + "self_attn.q_norm.weight"] = (hd,)
        shapes[p + "self_attn.k_norm.weight"] = (hd,)
        shapes[p + "mlp.gate_proj.weight"] = (ti, th)
        shapes[p + "mlp.up_proj.weight"] = (ti, th)
        shapes[p + "mlp.down_proj.weight"] = (th, ti)
    if not txt.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (txt["vocab_size"], th)
    return shapes


def write_random_weights(*, out: Path, seed: int = 0) -> tuple[int, float]:
    """Write model.safetensors with random bf16 weights; returns (parameters, seconds)."""
    import torch
    from safetensors.torch import save_file

    config = json.loads((out / "config.json").read_text())
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator(device=device).manual_seed(seed)
    started = time.perf_counter()
    tensors = {}
    for name, shape in weight_shapes(config).items():
        if name.endswith("norm.weight"):
            tensors[name] = torch.ones(shape, dtype=torch.bfloat16)
        else:
            values = torch.randn(shape, generator=generator, device=device, dtype=torch.float32) * 0.02
            tensors[name] = values.to(torch.bfloat16).cpu()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    count = sum(t.numel() for t in tensors.values())
    return count, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--configs", type=Path, default=DEFAULT_CONFIGS)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--tiktoken", type=Path, help="dashscope/resources/qwen.tiktoken")
    source.add_argument("--tokenizer-json", type=Path, help="a tokenizer.json built earlier by --tiktoken")
    parser.add_argument("--weights", action="store_true", help="also write random-weight model.safetensors")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    copy_configs(src=args.configs, out=args.out)
    if args.tiktoken:
        build_tokenizer_json(tiktoken_path=args.tiktoken, out=args.out)
    else:
        shutil.copyfile(args.tokenizer_json, args.out / "tokenizer.json")
        check_tokenizer(args.out / "tokenizer.json")
    print(f"tokenizer ok: {args.out / 'tokenizer.json'}")
    if args.weights:
        count, seconds = write_random_weights(out=args.out, seed=args.seed)
        size = (args.out / "model.safetensors").stat().st_size
        print(f"model.safetensors: {count / 1e9:.3f} B parameters, {size / 2**30:.2f} GiB, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
