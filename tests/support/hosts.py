"""Hosts made of Linux namespaces, for tests of ocrq spread over several machines that share only a network.

Each host is a network namespace with its own address on a private bridge, a UTS namespace with its own
hostname, and its own HOME and TMPDIR; nothing else is shared. The bridge lives in a namespace of its own; the
test process reaches the hosts through one veth whose root end has the subnet's first address (the test's own
address, e.g. for a webhook receiver). Nothing is routed beyond the subnet, and everything is removed on close.

    with Network(tmp_path) as net:
        db = net.host("services")                     # 10.213.N.2, hostname "services"
        db.popen(["redis-server", "--bind", db.address], log=...)
        db.kill_all()                                 # SIGKILL every process in the namespace, as a host dying
Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; `available()` says why not.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

NETNS_DIR = Path("/run/netns")


def available() -> str | None:
    """None when hosts can be built here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "namespaces need root"
    for tool in ("ip", "nsenter", "unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing"
    return None


def _run(*args: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if result.returncode:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip()}")


class Host:
    """One machine: a network and a UTS namespace, an address, a HOME and a TMPDIR."""

    def __init__(self, *, name: str, netns: str, uts: Path, address: str, root: Path) -> None:
        self.name, self.netns, self.uts, self.address = name, netns, uts, address
        self.home, self.tmp = root / "home", root / "tmp"
        self.home.mkdir(parents=True)
        self.tmp.mkdir()
        self.home.chmod(0o755)
        self.tmp.chmod(0o1777)

    def command(self, argv: list[str], *, user: str | None = None) -> list[str]:
        """argv run on this host (as `user`, if given)."""
        enter = ["nsenter", f"--net={NETNS_DIR / self.netns}", f"--uts={self.uts}", "--"]
        if user:
            enter += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        return enter + argv

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a process on this host: the caller's, with this host's HOME and TMPDIR."""
        return os.environ | {"HOME": str(self.home), "TMPDIR": str(self.tmp)} | (extra or {})

    def popen(self, argv: list[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None,
              user: str | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.command(argv, user=user), env=env if env is not None else self.env(), cwd=cwd,
                                stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def pids(self) -> list[int]:
        """Every process whose network namespace is this host's."""
        want = os.stat(NETNS_DIR / self.netns).st_ino
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.stat(entry / "ns" / "net").st_ino == want:
                        found.append(int(entry.name))
                except OSError:  # ended meanwhile
                    continue
        return found

    def kill_all(self, timeout: float = 10) -> int:
        """SIGKILL every process on this host, as its power failing; the number killed."""
        killed = self.pids()
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        if left:
            raise RuntimeError(f"host {self.name}: processes {left} survived SIGKILL")
        return len(killed)


class Network:
    """A private subnet 10.213.N.0/24 on a bridge; `host()` adds machines to it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tag = f"{os.getpid() % 10000:04d}{random.randrange(36 ** 2):02x}"[-5:]
        self.subnet = random.randrange(1, 255)
        self.switch = f"oq{self.tag}sw"
        self.hosts: list[Host] = []
        self.address = self._address(1)  # the test process's own, on the root end of its veth

    def _address(self, n: int) -> str:
        return f"10.213.{self.subnet}.{n}"

    def __enter__(self) -> Network:
        self.root.mkdir(parents=True, exist_ok=True)
        _run("ip", "netns", "add", self.switch)
        try:
            _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.switch, "link", "set", "br0", "up")
            self._plug(f"oq{self.tag}r", into=None, address=self.address)
        except Exception:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _plug(self, name: str, *, into: str | None, address: str) -> None:
        """A veth from the bridge to `into` (a host's namespace; None: the test's own), named `name` there."""
        peer = f"{name}p"
        _run("ip", "-n", self.switch, "link", "add", peer, "type", "veth", "peer", "name", name)
        _run("ip", "-n", self.switch, "link", "set", peer, "master", "br0", "up")
        if into is None:
            _run("ip", "-n", self.switch, "link", "set", name, "netns", str(os.getpid()))
            _run("ip", "addr", "add", f"{address}/24", "dev", name)
            _run("ip", "link", "set", name, "up")
        else:
            _run("ip", "-n", self.switch, "link", "set", name, "netns", into)
            _run("ip", "-n", into, "addr", "add", f"{address}/24", "dev", name)
            _run("ip", "-n", into, "link", "set", name, "up")
            _run("ip", "-n", into, "link", "set", "lo", "up")

    def host(self, name: str) -> Host:
        """A new machine on this network, with hostname `name` and the next address."""
        n = len(self.hosts) + 2
        netns, uts = f"oq{self.tag}h{n}", self.root / f"{name}.uts"
        host = Host(name=name, netns=netns, uts=uts, address=self._address(n), root=self.root / name)
        uts.touch()
        _run("ip", "netns", "add", netns)
        self.hosts.append(host)  # close() removes it from here on
        _run("unshare", f"--uts={uts}", "hostname", name)
        self._plug(f"oq{self.tag}e{n}", into=netns, address=host.address)
        return host

    def close(self) -> None:
        for host in self.hosts:
            try:
                if (NETNS_DIR / host.netns).exists():
                    host.kill_all()
            finally:
                subprocess.run(["ip", "netns", "del", host.netns], capture_output=True, timeout=30)
                subprocess.run(["umount", str(host.uts)], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", f"oq{self.tag}r"], capture_output=True, timeout=30)
        # Deleting the switch's namespace deletes its veth ends, and so their peers.
        subprocess.run(["ip", "netns", "del", self.switch], capture_output=True, timeout=30)
        self.hosts = []
