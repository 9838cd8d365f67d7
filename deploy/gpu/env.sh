# Source on the GPU host from the checkout root, after .gpu/partN/setup.sh has run once on this machine:
# vLLM's environment, ocrq's extra wheels, and the ocrq encoder plugin registered as an installed entry point.
. /root/vllm-env.sh
ocrq_repo=$(pwd)
ocrq_site=/root/ocrq-site
if [ ! -d "$ocrq_site/tenacity" ]; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$ocrq_site" \
    .gpuwork/wheels/*.whl
fi
# FlashInfer, where its wheels were stashed (README.md): its JIT needs nvcc's CUDA home and builds for sm_90a here.
if [ -d /root/stash-fi ] && [ ! -d "$ocrq_site/flashinfer" ]; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$ocrq_site" \
    /root/stash-fi/*.whl
fi
if [ -z "${CUDA_HOME:-}" ]; then
  nvcc_path=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -n 1)
  [ -n "$nvcc_path" ] && export CUDA_HOME=$(dirname "$(dirname "$nvcc_path")")
fi
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16}
# vLLM finds general plugins through entry points; a dist-info on the path declares ours without installing.
mkdir -p "$ocrq_site/ocrq_gpu-0.dist-info"
printf 'Metadata-Version: 2.1\nName: ocrq-gpu\nVersion: 0\n' > "$ocrq_site/ocrq_gpu-0.dist-info/METADATA"
printf '[vllm.general_plugins]\nocrq_encoder = ocrq_vllm_plugin:register\n' \
  > "$ocrq_site/ocrq_gpu-0.dist-info/entry_points.txt"
export PYTHONPATH=$ocrq_repo:$ocrq_site:$PYTHONPATH
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# vLLM samples through FlashInfer by default; without FlashInfer here it must not try (`ocrq engine` decides the same).
if [ -d "$ocrq_site/flashinfer" ]; then unset VLLM_USE_FLASHINFER_SAMPLER; else export VLLM_USE_FLASHINFER_SAMPLER=0; fi
