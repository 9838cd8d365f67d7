#!/usr/bin/env bash
# The GPU measurements of issue 9, one after another, each under `timeout`; start.sh runs this from
# /root/ocrq-repo. Results: $run/results.jsonl (one JSON line a measurement), $run/progress.txt, $run/logs/.
#   steps: model check before after fp8 16gb   (default: all, in that order)
set -uo pipefail
run=${OCRQ_GPU_RUN:-/root/ocrq-run}
. deploy/gpu/env.sh
model_dir=/root/lightonocr-2-1b
name=lightonai/LightOnOCR-2-1B
port=8100
url=http://127.0.0.1:$port
results=$run/results.jsonl
mkdir -p "$run/logs"
rm -f "$run/done"
load_args=()
launcher=
trap 'unserve; touch "$run/done"' EXIT

say() { echo "[$(date +%T)] $*" | tee -a "$run/progress.txt"; }

is_ready() {
  python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/v1/models', timeout=2)" \
    "$url" 2>/dev/null
}

serve() {  # serve LABEL [ocrq engine options...]: start `ocrq engine`, wait for /v1/models
  local label=$1; shift
  local t0; t0=$(date +%s)
  say "serve $label: ${load_args[*]} $*"
  setsid python3 -m cli.engine --model "$model_dir" --served-model-name "$name" --port "$port" \
    --log-dir "$run/logs/$label" "${load_args[@]}" "$@" > "$run/logs/$label.launcher.log" 2>&1 < /dev/null &
  launcher=$!
  while [ $(( $(date +%s) - t0 )) -lt "${READY_S:-420}" ]; do
    if is_ready; then
      local s=$(( $(date +%s) - t0 ))
      say "ready $label after ${s}s"
      printf '{"mode":"startup","label":"%s","ready_s":%d,"args":"%s"}\n' "$label" "$s" "${load_args[*]} $*" >> "$results"
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || break
    sleep 2
  done
  say "FAILED to serve $label: $(grep -hE 'Error|error' "$run/logs/$label"/*.log 2>/dev/null | tail -3)"
  unserve
  return 1
}

unserve() {  # stop the launcher (SIGTERM stops its engines); then whatever still holds the GPU, by pid
  [ -n "$launcher" ] || return 0
  kill -TERM "$launcher" 2>/dev/null
  for _ in $(seq 1 60); do kill -0 "$launcher" 2>/dev/null || break; sleep 1; done
  kill -KILL "$launcher" 2>/dev/null
  for pid in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  launcher=
  sleep 3
}

serve_or_safe() {  # as serve, then once more with the flags known to run here (one API server, eager)
  local label=$1; shift
  serve "$label" "$@" && return 0
  if grep -qiE 'not initialized from checkpoint|safetensors|KeyError' "$run/logs/$label"/*.log 2>/dev/null; then
    say "real weights failed to load; using --load-format dummy from here on"
    load_args=(--load-format dummy)
  fi
  serve "$label-safe" "$@" --api-server-count 1 --renderer-workers 1 --cuda-graphs off
}

bench() {  # bench SECONDS MODE LABEL [gpu_raw options...]
  local limit=$1 mode=$2 label=$3; shift 3
  say "bench $mode $label $*"
  timeout "$limit" python3 bench/gpu_raw.py "$mode" --url "$url" --model "$name" --label "$label" \
    --out "$results" "$@" 2>&1 | tail -n 3 | tee -a "$run/progress.txt"
}

step_model() {
  say "model dir with random real-safetensors weights"
  if ! timeout 300 python3 bench/gpu_model_dir.py --out "$model_dir" --configs .gpuwork/lightonocr-2-1b \
      --tiktoken .gpuwork/qwen.tiktoken --weights 2>&1 | tee -a "$run/progress.txt"; then
    say "no weights written; engines use --load-format dummy"
    load_args=(--load-format dummy)
  fi
}

step_check() {
  say "encoder attention selfcheck"
  timeout 240 python3 -m ocrq_vllm_plugin.selfcheck 2>&1 | tail -n 1 | tee -a "$run/progress.txt" >> "$results"
}

step_before() {
  serve_or_safe before-bf16 --profile h200 --no-encoder-plugin || return
  bench 120 probe before-bf16 --tokens 48
  bench 150 single before-bf16 --tokens 1000 --repeats 1
  bench 330 http before-bf16 --pages 256 --tokens 1000
  unserve
}

step_after() {
  serve_or_safe after-bf16 --profile h200 || return
  bench 120 probe after-bf16 --tokens 48
  bench 150 single after-bf16 --tokens 1000 --repeats 2
  bench 240 http after-bf16 --pages 256 --tokens 1000
  bench 240 engine after-bf16 --pages 256 --tokens 1000 --batch 16 --workers 16 --concurrency 256
  unserve
}

step_fp8() {
  serve_or_safe after-fp8 --profile h200 --kv-cache-dtype fp8 || return
  bench 240 http after-fp8 --pages 256 --tokens 1000
  bench 150 single after-fp8 --tokens 1000 --repeats 1
  unserve
}

step_16gb() {
  serve_or_safe 16gb --profile 16gb --memory-cap-gib 16 || return
  bench 480 http 16gb-mixed --pages 1000 --tokens 200 --mixed --concurrency 64 --gpu-memory
  unserve
}

step_diag() {  # where the time goes: one API server (vLLM logs its throughput then), sampling, page count
  serve_or_safe diag-fp8-1api --profile h200 --kv-cache-dtype fp8 --api-server-count 1 || return
  bench 120 http diag-fp8-1api --pages 256 --tokens 1000
  bench 120 http diag-fp8-1api-greedy --pages 256 --tokens 1000 --temperature 0 --top-p 1
  bench 180 http diag-fp8-1api-512 --pages 512 --tokens 1000
  unserve
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$run/progress.txt"
for step in "${@:-model check before after fp8 16gb}"; do
  for s in $step; do "step_$s"; done
done
grep -hE "KV cache|Maximum concurrency|Loading weights took|Model loading took|memory profiling|plugin" \
  "$run"/logs/*/*.log 2>/dev/null | cut -c1-240 | tee -a "$run/progress.txt"
say "pipeline finished"
