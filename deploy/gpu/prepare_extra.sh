#!/usr/bin/env bash
# On the CPU machine, after `bash ../shared/gpu/prepare.sh`: stage what the ocrq GPU steps carry besides
# vLLM into .gpuwork/ (git-ignored): the model configs, Qwen's BPE ranks, and ocrq's extra wheels.
# Run from the checkout root: bash deploy/gpu/prepare_extra.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
shared=${OCRQ_SHARED_GPU:-$root/../shared/gpu}
work=$root/.gpuwork
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpuwork/' "$exclude" 2>/dev/null || echo '/.gpuwork/' >> "$exclude"
mkdir -p "$work/wheels" "$work/lightonocr-2-1b" /tmp/ocrq-dashscope
cp "$shared"/lightonocr-2-1b/*.json "$work/lightonocr-2-1b/"
if [ ! -f "$work/qwen.tiktoken" ]; then
  timeout 300 python3 -m pip download -q --no-deps dashscope -d /tmp/ocrq-dashscope
  unzip -o -q -j /tmp/ocrq-dashscope/dashscope-*.whl 'dashscope/resources/qwen.tiktoken' -d "$work"
fi
grep -E '^(tenacity|pydantic-settings|python-dotenv)==' "$root/deploy/gpu/requirements-gpu.txt" | while read -r req; do
  timeout 300 python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform any -d "$work/wheels" "$req"
done
# FlashInfer as vLLM 0.26 pins it (JIT sources: its kernels compile on the GPU host with the image's nvcc), and
# the one requirement the device image lacks that it imports; carried with part1 (README.md).
fi=$root/.gpu/flashinfer
mkdir -p "$fi"
for req in flashinfer-python==0.6.14 cuda-tile; do
  timeout 300 python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d "$fi" "$req"
done
du -sh "$work" "$fi"
echo "carry [\".gpu/partN\", \".gpuwork\"] with the last part, \".gpu/flashinfer\" with part1; see deploy/gpu/README.md"
