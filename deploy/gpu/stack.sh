#!/usr/bin/env bash
# On the GPU host, from the checkout root, after deploy/gpu/services.sh: ocrq itself on those services, against
# the vLLM engines already serving at $OCRQ_ENGINE_URLS (and $OCRQ_ENGINE_INTERACTIVE_URLS, if set).
#   bash deploy/gpu/stack.sh start [TOKENS]   API + CPU workers + GPU workers; TOKENS > 0 forces every page to
#                                             exactly TOKENS tokens (ignore_eos, no repetition guard): benchmarks
#   bash deploy/gpu/stack.sh stop | status
# Layout (for ~10 pages/s on 16 cores; each override is an env variable):
#   api              `ocrq api --workers $OCRQ_STACK_API_WORKERS` (4) on 127.0.0.1:$OCRQ_STACK_API_PORT (8000)
#   cpu-control      listing + control queues, with beat, 2 processes: interactive jobs are split here and never
#                    wait behind bulk splitting
#   cpu-prepare      control + prepare.bulk, $OCRQ_STACK_CPU_CONCURRENCY (6) processes: splits bulk jobs
#   gpu-interactive  the interactive GPU buckets, $OCRQ_STACK_INTERACTIVE_CONCURRENCY (8, the interactive engine's max_num_seqs) processes, each page sent
#                    as it comes (pair 1), to the interactive engines if any
#   gpu-bulk         the bulk GPU buckets, $OCRQ_STACK_GPU_CONCURRENCY (32) processes x pair $OCRQ_STACK_PAIR_SIZE
#                    (16) = 512 pages in flight at most (the h200 profile's max_num_seqs): a process renders its
#                    batch (one fork per page) and then waits on the engine for all of it. Batches leave part-filled
#                    (OCRQ_ENGINE_BATCH_WAIT_S, 0.25 s), so fewer are in flight. 64 processes measured worse,
#                    but while pages at the engine were read again (BENCHMARKS.md, 2026-12-01, issue 21, run 10).
#                    $OCRQ_STACK_GPU_POOL (prefork) picks Celery's pool: with threads each thread frees its page's
#                    slot as the page comes back, and $OCRQ_STACK_GPU_WORKERS (1) such workers (gpu-bulk,
#                    gpu-bulk-2, ...) split the pages in flight, each process holding and forking for fewer
# GPU workers take only GPU queues (jobs are split on the CPU workers), so a busy GPU worker never sits on
# prefetched split tasks. With OCRQ_STACK_LANES=0 one GPU worker takes both lanes (interactive buckets first).
# A `worker` without --lane gets the same split through --queues and per-process settings.
set -uo pipefail
root=$(pwd)
svc=${OCRQ_SVC_HOME:-/root/ocrq-svc}
[ -f "$svc/env.sh" ] || { echo "no $svc/env.sh: run deploy/gpu/services.sh first"; exit 1; }
. "$svc/env.sh"
PY=${OCRQ_SVC_PYTHON:-python3}
run=$svc/stack
logs=$svc/logs
mkdir -p "$run" "$logs"
api_port=${OCRQ_STACK_API_PORT:-8000}
api_key=${OCRQ_STACK_API_KEY:-ocrq-bench-key-0123456789}
gpu_workers=${OCRQ_STACK_GPU_WORKERS:-1}
[[ "$gpu_workers" =~ ^[1-9][0-9]*$ ]] || { echo "OCRQ_STACK_GPU_WORKERS must be a whole number >= 1"; exit 2; }
names=(api cpu-control cpu-prepare gpu-interactive gpu-bulk gpu)
for f in "$run"/gpu-bulk-*.pid; do [ -f "$f" ] && names+=("$(basename "$f" .pid)"); done  # started by an earlier call
for i in $(seq 2 "$gpu_workers"); do [[ " ${names[*]} " == *" gpu-bulk-$i "* ]] || names+=("gpu-bulk-$i"); done

say() { echo "[stack $(date +%T)] $*"; }
alive() { [ -f "$run/$1.pid" ] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }

stop() {
  local name pids=()
  for name in "${names[@]}"; do
    alive "$name" && { kill -TERM -- "-$(cat "$run/$name.pid")" 2>/dev/null; pids+=("$name"); }
  done
  for _ in $(seq 1 60); do
    local left=0
    for name in "${pids[@]}"; do alive "$name" && left=1; done
    [ $left = 0 ] && break
    sleep 0.5
  done
  for name in "${pids[@]}"; do alive "$name" && kill -KILL -- "-$(cat "$run/$name.pid")" 2>/dev/null; done
  for name in "${names[@]}"; do rm -f "$run/$name.pid"; done
  [ ${#pids[@]} -gt 0 ] && say "stopped: ${pids[*]}"
  return 0
}

status() {
  local name
  for name in "${names[@]}"; do
    [ -f "$run/$name.pid" ] || continue
    alive "$name" && echo "$name: up (pid $(cat "$run/$name.pid"))" || echo "$name: DOWN (log $logs/$name.log)"
  done
  timeout 5 "$PY" -c "import sys, urllib.request
print('api:', urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())" "http://127.0.0.1:$api_port/healthz" \
    2>/dev/null || echo "api: not answering on $api_port"
}

launch() {  # launch NAME ENV... -- ARGS...: `python -m cli.main ARGS` in its own session, log and pid under $svc
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" setsid nohup "$PY" -m cli.main "$@" > "$logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$run/$name.pid"
  say "$name: $* (pid $!${envs:+, ${envs[*]}})"
}

case "${1:-}" in
  stop) stop; exit 0 ;;
  status) status; exit 0 ;;
  start) ;;
  *) echo "usage: bash deploy/gpu/stack.sh start [TOKENS] | stop | status"; exit 2 ;;
esac

running=0
for name in "${names[@]}"; do alive "$name" && running=1; done
if [ $running = 1 ]; then say "already running (stack.sh stop first to change it)"; status; exit 0; fi
[ -n "${OCRQ_ENGINE_URLS:-}" ] || { echo "set OCRQ_ENGINE_URLS (the vLLM engines, e.g. http://127.0.0.1:8100)"; exit 2; }
# The processes run from a copy of the tree: a later call's fresh checkout must not pull files from under them.
repo=$svc/repo
if [ "$root" != "$repo" ]; then
  rm -rf "$repo" && mkdir -p "$repo"
  tar -C "$root" --exclude=./.git --exclude=./.gpu --exclude=./.gpusvc --exclude=./.gpuwork --exclude=./.venv \
    -cf - . | tar -C "$repo" -xf -
fi
cd "$repo"
export PYTHONPATH=$repo:$PYTHONPATH

tokens=${2:-${OCRQ_STACK_TOKENS:-0}}
[[ "$tokens" =~ ^[0-9]+$ ]] || { echo "TOKENS must be a whole number (0: not forced), not $tokens"; exit 2; }
export OCRQ_ENGINE=vllm
export OCRQ_API_KEYS=bench:$api_key
export OCRQ_ENGINE_MODEL=${OCRQ_ENGINE_MODEL:-lightonai/LightOnOCR-2-1B}
# No per-tenant request limit: one benchmark tenant submits and polls thousands of jobs.
export OCRQ_RATE_LIMIT_RPS=${OCRQ_RATE_LIMIT_RPS:-0}
# A batch of 16 pages of 1,000 tokens under a full engine can take minutes: never fail it on the clock.
export OCRQ_ENGINE_TIMEOUT_S=${OCRQ_ENGINE_TIMEOUT_S:-600}
export OCRQ_TASK_SOFT_TIME_LIMIT_S=${OCRQ_TASK_SOFT_TIME_LIMIT_S:-900}
export OCRQ_TASK_TIME_LIMIT_S=${OCRQ_TASK_TIME_LIMIT_S:-960}
export OCRQ_VISIBILITY_TIMEOUT_S=${OCRQ_VISIBILITY_TIMEOUT_S:-3600}
# Pages prefetched by the bulk GPU worker stay `queued` in the database while the Redis queue is empty; at the
# default 120 s the sweeper would publish every one of them again during a long backlog.
export OCRQ_STALE_REQUEUE_AFTER_S=${OCRQ_STALE_REQUEUE_AFTER_S:-900}
if [ "$tokens" -gt 0 ]; then
  export OCRQ_ENGINE_MAX_TOKENS=$tokens OCRQ_ENGINE_EXTRA_BODY='{"ignore_eos": true}' OCRQ_ENGINE_GUARD_REPETITION=false
  "$PY" -c "from common.settings import Settings as S; import sys
sys.exit(0 if {'engine_extra_body', 'engine_guard_repetition'} <= set(S.model_fields) else 1)" \
    || say "WARNING: this ocrq has no OCRQ_ENGINE_EXTRA_BODY / OCRQ_ENGINE_GUARD_REPETITION: output is not forced"
fi

queues() { timeout 60 "$PY" -c "import sys; from common.queue.names import gpu_worker_queues
print(','.join(gpu_worker_queues(*sys.argv[1:])))" "$@"; }
q_interactive=$(queues interactive) && q_bulk=$(queues bulk) && q_all=$(queues) || { echo "cannot import ocrq"; exit 1; }
if NO_COLOR=1 TERM=dumb COLUMNS=200 timeout 60 "$PY" -m cli.main worker --help 2>/dev/null | grep -q -- '--lane'; then
  lane_flag=1
else
  lane_flag=0; say "this ocrq has no \`worker --lane\`: lanes by --queues and per-worker engine settings"
fi
gpu_c=${OCRQ_STACK_GPU_CONCURRENCY:-32}
gpu_pool=${OCRQ_STACK_GPU_POOL:-prefork}
pair=${OCRQ_STACK_PAIR_SIZE:-16}
int_c=${OCRQ_STACK_INTERACTIVE_CONCURRENCY:-8}
cpu_c=${OCRQ_STACK_CPU_CONCURRENCY:-6}
lanes=${OCRQ_STACK_LANES:-1}

launch api -- api --host 127.0.0.1 --port "$api_port" --workers "${OCRQ_STACK_API_WORKERS:-4}"
launch cpu-control -- worker --queues ocrq.listing,ocrq.control --concurrency 2 --beat
launch cpu-prepare -- worker --queues ocrq.control,ocrq.prepare.bulk --concurrency "$cpu_c"
if [ "$lanes" = 1 ]; then
  int_urls=${OCRQ_ENGINE_INTERACTIVE_URLS:-$OCRQ_ENGINE_URLS}
  if [ $lane_flag = 1 ]; then
    launch gpu-interactive OCRQ_ENGINE_INTERACTIVE_PAIR_SIZE="${OCRQ_ENGINE_INTERACTIVE_PAIR_SIZE:-1}" -- \
      worker --gpu --lane interactive --queues "$q_interactive" --concurrency "$int_c"
    for i in $(seq 1 "$gpu_workers"); do
      launch "gpu-bulk$([ "$i" = 1 ] || echo "-$i")" OCRQ_ENGINE_PAIR_SIZE="$pair" -- worker --gpu --lane bulk \
        --queues "$q_bulk" --concurrency "$gpu_c" --pool "$gpu_pool"
    done
  else
    launch gpu-interactive OCRQ_ENGINE_URLS="$int_urls" OCRQ_ENGINE_PAIR_SIZE="${OCRQ_ENGINE_INTERACTIVE_PAIR_SIZE:-1}" \
      -- worker --gpu --queues "$q_interactive" --concurrency "$int_c"
    launch gpu-bulk OCRQ_ENGINE_PAIR_SIZE="$pair" -- worker --gpu --queues "$q_bulk" --concurrency "$gpu_c" \
      --pool "$gpu_pool"
  fi
else
  launch gpu OCRQ_ENGINE_PAIR_SIZE="$pair" -- worker --gpu --queues "$q_all" --concurrency "$gpu_c"
fi

# Ready: the API answers /healthz and every worker has logged Celery's "ready.".
deadline=$(( $(date +%s) + ${OCRQ_STACK_READY_S:-150} ))
pending=()
for name in "${names[@]}"; do [ -f "$run/$name.pid" ] && pending+=("$name"); done
while [ ${#pending[@]} -gt 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do
  left=()
  for name in "${pending[@]}"; do
    if ! alive "$name"; then
      say "FAILED: $name exited: $(tail -n 5 "$logs/$name.log")"; stop; exit 1
    elif [ "$name" = api ]; then
      timeout 3 "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "http://127.0.0.1:$api_port/healthz" 2>/dev/null || left+=("$name")
    else
      grep -q ' ready\.' "$logs/$name.log" 2>/dev/null || left+=("$name")
    fi
  done
  pending=("${left[@]}")
  [ ${#pending[@]} -gt 0 ] && sleep 1
done
if [ ${#pending[@]} -gt 0 ]; then say "FAILED: not ready: ${pending[*]} (logs in $logs)"; stop; exit 1; fi
cat > "$run/stack.json" <<EOF
{"api_url": "http://127.0.0.1:$api_port", "tokens": $tokens, "engine_urls": "$OCRQ_ENGINE_URLS",
 "interactive_urls": "${OCRQ_ENGINE_INTERACTIVE_URLS:-}", "lanes": $lanes, "lane_flag": $lane_flag,
 "api_workers": ${OCRQ_STACK_API_WORKERS:-4}, "cpu_prepare": $cpu_c, "gpu_bulk_procs": $gpu_c,
 "gpu_bulk_workers": $gpu_workers,
 "gpu_pool": "$gpu_pool", "pair": $pair,
 "gpu_interactive_procs": $int_c, "nproc": $(nproc)}
EOF
echo "$api_key" > "$run/api_key"
say "ready: API http://127.0.0.1:$api_port (key in $run/api_key), engines $OCRQ_ENGINE_URLS, tokens ${tokens}"
