"""Private Postgres and Redis servers for tests, on free loopback ports in a temporary folder.

For tests that must restart a server, and for `./run test` on a machine where none is reachable.
Never touches the machine's own servers.

    with PostgresServer() as pg, RedisServer() as rd:
        pg.url                      # postgresql://postgres@127.0.0.1:PORT/postgres (trust auth, superuser)
        pg.database_url("ocrq_x")   # the same server, another database
        rd.url                      # redis://127.0.0.1:PORT/0
        pg.restart()                # stop, start again on the same port with the same data
        rd.restart(keep_data=False) # stop, start again on the same port, empty
        rd.stop(); rd.start()       # or by hand; stop(hard=True) is a SIGKILL, as in a crash

The port stays the same across restarts, so URLs handed out before a restart still work after it.
Leaving the `with` block (or `close()`) stops the server and removes its folder.

Postgres: initdb and postgres from /usr/lib/postgresql/<newest>/bin or PATH; trust auth, listening on
127.0.0.1 only, its unix socket in the temporary folder; fsync off (test data need not survive a power
cut, only a restart). As root it runs as the `postgres` account (or `nobody`), since postgres refuses root.
Redis: /usr/bin/redis-server (or PATH) with `--bind 127.0.0.1 --port N --dir TMP --save SAVE`; `save`
defaults to '' (no snapshots). `restart(keep_data=True)` saves a snapshot on the way down and loads it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

MISSING = ("Postgres and Redis servers are needed: apt-get install postgresql redis-server "
           "(Debian/Ubuntu), or point OCRQ_TEST_PG_ADMIN and OCRQ_TEST_REDIS at running ones")


class ServerError(RuntimeError):
    """A private server could not be found, started or stopped."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(count: int) -> int:
    """The first of `count` consecutive free loopback ports (a launcher gives engine N the port base + N)."""
    for _ in range(200):
        base = free_port()
        if base + count <= 65536 and all(bindable(base + k) for k in range(1, count)):
            return base
    raise ServerError(f"no {count} consecutive free ports")


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def postgres_bin_dir() -> Path | None:
    """The newest Debian Postgres bin folder, else the folder of `postgres` on PATH, else None."""
    def version(path: str) -> float:
        try:
            return float(Path(path).parent.name)
        except ValueError:
            return 0.0
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "postgres").exists():
            return Path(candidate)
    found = shutil.which("postgres")
    return Path(found).resolve().parent if found and (Path(found).resolve().parent / "initdb").exists() else None


def redis_binary() -> str | None:
    return "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else shutil.which("redis-server")


def _unprivileged_user() -> str | None:
    """The account to run postgres as when we are root (postgres refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise ServerError("running as root and there is no `postgres` or `nobody` account to run postgres as")


class _Server:
    name = "server"

    def __init__(self, *, port: int | None = None, base_dir: Path | None = None, timeout: float = 30.0,
                 host: str = "127.0.0.1", on=None) -> None:
        # `on`: a tests.support.hosts.Host whose namespaces the server runs in, listening on `host` there.
        self.host, self.on = host, on
        self.port = port or free_port()
        self._own_dir = base_dir is None
        self.dir = Path(base_dir or tempfile.mkdtemp(prefix=f"ocrq-{self.name}-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.process: subprocess.Popen | None = None
        self.log = self.dir / f"{self.name}.log"

    # -- to be filled in by each server
    def _command(self) -> list[str]: raise NotImplementedError
    def _prepare(self) -> None: pass
    def _ready(self) -> bool: raise NotImplementedError
    def _wipe(self) -> None: raise NotImplementedError
    def _user(self) -> str | None: return None

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self):
        """Start on self.port and wait until it answers; returns self."""
        if self.running:
            return self
        self._prepare()
        argv, user, env = self._command(), self._user(), None
        if self.on is not None:
            argv, user, env = self.on.command(argv, user=user), None, self.on.env()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL, start_new_session=True, user=user)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"{self.name} exited with {self.process.returncode}: {self._log_tail()}")
            if self._ready():
                return self
            time.sleep(0.1)
        self.stop(hard=True)
        raise ServerError(f"{self.name} did not answer on port {self.port} in {self.timeout}s: {self._log_tail()}")

    def stop(self, *, hard: bool = False) -> None:
        """Stop the server: a clean shutdown, or a SIGKILL with hard=True."""
        self._halt(lambda: self._signal(signal.SIGKILL if hard else self._stop_signal))

    def _halt(self, ask) -> None:
        """Ask the server to stop, wait for it (killing it if it takes too long) and for its port to close."""
        if not self.running:
            return
        ask()
        try:
            self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self._wait_port_free()

    def restart(self, *, keep_data: bool = True):
        """Stop and start again on the same port; with keep_data=False it comes back empty."""
        self.stop()
        if not keep_data:
            self._wipe()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the folder if this object made it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    _stop_signal = signal.SIGTERM

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def _wait_port_free(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex((self.host, self.port)) != 0:
                    return
            time.sleep(0.05)

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"


class PostgresServer(_Server):
    """A private Postgres (superuser `postgres`, trust auth); `url` is its `postgres` maintenance database."""

    name = "postgres"
    # SIGINT is Postgres's "fast" shutdown: it ends sessions and checkpoints, so the data survive.
    _stop_signal = signal.SIGINT

    def __init__(self, *, options: dict[str, str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.bin = postgres_bin_dir()
        if self.bin is None:
            raise ServerError(f"initdb/postgres not found. {MISSING}")
        self.data = self.dir / "data"
        self.socket_dir = self.dir / "sock"
        self.options = {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off",
                        "max_connections": "200"} | (options or {})
        self._as = _unprivileged_user()
        if self._as:
            self.dir.chmod(0o755)
            os.chown(self.dir, pwd.getpwnam(self._as).pw_uid, pwd.getpwnam(self._as).pw_gid)

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{name}"

    def _user(self) -> str | None:
        return self._as

    def _prepare(self) -> None:
        self.socket_dir.mkdir(exist_ok=True)
        if self._as:
            owner = pwd.getpwnam(self._as)
            os.chown(self.socket_dir, owner.pw_uid, owner.pw_gid)
        if (self.data / "PG_VERSION").exists():
            return
        result = subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
             "--locale=C", "--no-sync"], capture_output=True, text=True, user=self._as, cwd=self.dir, check=False)
        if result.returncode:
            raise ServerError(f"initdb failed: {result.stderr[-2000:]}")
        if self.host != "127.0.0.1":  # initdb trusts loopback only; a namespace's address trusts its own subnet
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write("host all all samenet trust\n")

    def _command(self) -> list[str]:
        args = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", f"listen_addresses={self.host}", "-c", f"unix_socket_directories={self.socket_dir}"]
        for key, value in self.options.items():
            args += ["-c", f"{key}={value}"]
        return args

    def _ready(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url, connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def _wipe(self) -> None:
        shutil.rmtree(self.data, ignore_errors=True)


class RedisServer(_Server):
    """A private Redis; `save` is its `--save` setting ('' = no snapshots on its own)."""

    name = "redis"

    def __init__(self, *, save: str = "", extra_args: list[str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.binary = redis_binary()
        if self.binary is None:
            raise ServerError(f"redis-server not found. {MISSING}")
        self.save, self.extra_args = save, list(extra_args or [])

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def _command(self) -> list[str]:
        # Without a password Redis answers loopback only (protected mode); a namespace's address is the test's own.
        protected = [] if self.host == "127.0.0.1" else ["--protected-mode", "no"]
        return [self.binary, "--bind", self.host, "--port", str(self.port), "--dir", str(self.dir),
                "--save", self.save, "--daemonize", "no", "--logfile", "", *protected, *self.extra_args]

    def _command_reply(self, *words: str) -> bytes:
        payload = f"*{len(words)}\r\n".encode() + b"".join(
            f"${len(w.encode())}\r\n".encode() + w.encode() + b"\r\n" for w in words)
        with socket.create_connection((self.host, self.port), timeout=2) as sock:
            sock.sendall(payload)
            try:
                return sock.recv(64)
            except OSError:
                return b""

    def _ready(self) -> bool:
        try:
            return self._command_reply("PING").startswith(b"+PONG")
        except OSError:
            return False

    def restart(self, *, keep_data: bool = True):
        """Stop and start again on the same port: with keep_data, from a snapshot taken on the way down."""
        self._halt(lambda: self._shutdown(save=keep_data))
        if not keep_data:
            self._wipe()
        return self.start()

    def _shutdown(self, *, save: bool) -> None:
        try:
            self._command_reply("SHUTDOWN", "SAVE" if save else "NOSAVE")
        except OSError:
            pass

    def _wipe(self) -> None:
        for path in [self.dir / "dump.rdb", *self.dir.glob("appendonly*")]:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
