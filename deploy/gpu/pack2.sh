#!/usr/bin/env bash
# On the CPU machine, after ../shared/gpu/prepare.sh has filled its cache: repack vLLM 0.26.0 and its wheels into
# TWO carry folders, .gpu/p1 (58 MB of vLLM) and .gpu/p2 (the rest of vLLM, 14 MB, and
# the wheels, 24 MB), so a fresh machine needs two calls
# instead of three (one call carries at most 64 MiB, the checkout included: keep the checkout and the second call's
# other carried paths under about 10 MB together).
#   call 1: carry [".gpu/p1"]:            bash .gpu/p1/stash.sh
#   call 2: carry [".gpu/p2", ...]:       bash .gpu/p2/setup_fast.sh && . /root/vllm-env.sh && ...
# setup_fast.sh untars vLLM and the unpacked wheels side by side and skips setup.sh's pip run and import check, to
# spend fewer seconds of device time. Run from the checkout root.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
shared=${OCRQ_SHARED_GPU:-$root/../shared/gpu}
cache=${OCRQ_GPU_CACHE:-$HOME/.cache/ocrq-gpu}
first=${OCRQ_PACK2_FIRST_BYTES:-58000000}
out=$root/.gpu
[ -f "$cache/vllm_slim.tar.xz" ] || { echo "run ../shared/gpu/prepare.sh first"; exit 2; }
rm -rf "$out/p1" "$out/p2" && mkdir -p "$out/p1" "$out/p2"
head -c "$first" "$cache/vllm_slim.tar.xz" > "$out/p1/vllm.00"
tail -c +$((first + 1)) "$cache/vllm_slim.tar.xz" > "$out/p2/vllm.01"
# The wheels, unpacked as the zips they are and packed again with xz: 49.5 MB of wheels -> 24 MB (8 minutes of xz
# on a loaded 2-core machine; kept in the cache). None has a .data/purelib part (only dill's and jmespath's
# scripts, unused), so unpacking is what pip --no-deps --target would write.
if [ ! -f "$cache/deps.tar.xz" ]; then
  rm -rf "$cache/depsite" && mkdir -p "$cache/depsite"
  python3 -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" \
    "$cache/depsite" $(ls "$cache"/wheels/*.whl | grep -v '/vllm-')
  tar -C "$cache/depsite" -cf - . | xz -9 -T2 > "$cache/deps.tar.xz.tmp" && mv "$cache/deps.tar.xz.tmp" "$cache/deps.tar.xz"
fi
cp "$cache/deps.tar.xz" "$out/p2/"
cp "$shared/stash.sh" "$out/p1/"
cp "$shared/stash.sh" "$out/p2/"
cat > "$out/p2/setup_fast.sh" <<'EOF'
#!/usr/bin/env bash
# On the device machine, after .gpu/p1/stash.sh on this same warm machine: vLLM into /root/site, /root/vllm-env.sh.
set -e
d=$(dirname "$0")
bash "$d/stash.sh"
if [ ! -d /root/site/vllm ]; then
  mkdir -p /root/site
  xz -d -T0 < "$d/deps.tar.xz" | tar -C /root/site -xf - &
  cat /root/stash/vllm.[0-9][0-9] | xz -d -T0 | tar -C /root/site -xf - || { echo "vLLM chunks incomplete"; exit 3; }
  wait
fi
{
  echo 'export PYTHONPATH=/root/site${PYTHONPATH:+:$PYTHONPATH}'
  echo 'export PYTHONUNBUFFERED=1'
  echo 'export VLLM_USE_FLASHINFER_SAMPLER=0'
} > /root/vllm-env.sh
echo "vLLM unpacked: $(ls /root/site | wc -l) entries in /root/site"
EOF
du -sh "$out/p1" "$out/p2"
