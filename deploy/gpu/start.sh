#!/usr/bin/env bash
# On the GPU host, from the checkout root: copy the checkout to /root/ocrq-repo and run pipeline.sh there
# in its own session, so the measurements outlive this command (a run is limited to 10 minutes).
#   bash deploy/gpu/start.sh [STEP...]      steps: model check before after fp8 16gb (default: all)
set -euo pipefail
run=${OCRQ_GPU_RUN:-/root/ocrq-run}
if [ -f "$run/pid" ] && kill -0 "$(cat "$run/pid")" 2>/dev/null; then
  echo "pipeline already running (pid $(cat "$run/pid"))"; exit 0
fi
rm -rf /root/ocrq-repo && mkdir -p /root/ocrq-repo "$run"
tar --exclude=./.gpu --exclude=./.venv --exclude=./.git -cf - . | tar -C /root/ocrq-repo -xf -
cd /root/ocrq-repo
setsid nohup bash deploy/gpu/pipeline.sh "$@" >> "$run/pipeline.log" 2>&1 < /dev/null &
echo $! > "$run/pid"
echo "pipeline started (pid $!), steps: ${*:-all}"
