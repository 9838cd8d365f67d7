#!/usr/bin/env bash
# On the GPU host: wait until the pipeline is done or SECONDS pass, then copy its results and logs to $OUT.
#   timeout 590 bash deploy/gpu/wait.sh 560
set -uo pipefail
run=${OCRQ_GPU_RUN:-/root/ocrq-run}
deadline=$(( $(date +%s) + ${1:-540} ))
while [ ! -f "$run/done" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
out=${OUT:-/tmp/ocrq-out}; mkdir -p "$out"
cp "$run"/results.jsonl "$run"/progress.txt "$run"/profile-*.txt "$out"/ 2>/dev/null
tail -c 2000000 "$run/pipeline.log" > "$out/pipeline.log" 2>/dev/null
tar -C "$run" -czf "$out/logs.tgz" logs 2>/dev/null
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
[ -f "$run/done" ] && echo "PIPELINE DONE" || echo "PIPELINE STILL RUNNING"
cat "$run/progress.txt" 2>/dev/null
