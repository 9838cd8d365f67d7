"""Object storage behind one small interface: S3 (any endpoint, path-style) or a local folder."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import unquote, urlparse

import boto3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import ClientError

from common import outages
from common.files import write_atomically
from common.settings import Settings


class ObjectMissing(Exception):
    """The object does not exist, or we may not read it."""


def _missing(exc: ClientError, what: str) -> ObjectMissing:
    """ObjectMissing for S3's answer; its "not now" answers (500, 503, SlowDown) are raised as they are, so that
    callers take them for an outage, not for a missing object."""
    if outages.outage_of(exc):
        raise exc
    return ObjectMissing(what)


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str


class Storage(Protocol):
    def put(self, key: str, data: bytes | BinaryIO, *, content_type: str = "application/octet-stream") -> None: ...
    def download(self, key: str, dest: Path) -> None: ...
    def read(self, key: str) -> bytes: ...
    def delete(self, key: str) -> None: ...
    def presign(self, key: str, *, ttl_s: int) -> str | None: ...
    def local_path(self, key: str) -> Path | None: ...
    def ping(self) -> None: ...


def s3_client(settings: Settings, *, endpoint_url: str | None = None) -> BaseClient:
    """A boto3 client for the configured endpoint (or `endpoint_url`), path-style so any S3 server works."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url or settings.s3_endpoint_url,
        region_name=settings.s3_region,
        aws_access_key_id=settings.s3_access_key_id,
        aws_secret_access_key=settings.s3_secret_access_key,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=60),
    )


class S3Storage:
    def __init__(self, client: BaseClient, bucket: str, prefix: str = "", *, signer: BaseClient | None = None) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix
        # Signs presigned links for the endpoint tenants reach; the signature covers the host it names.
        self.signer = signer or client

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def put(self, key: str, data: bytes | BinaryIO, *, content_type: str = "application/octet-stream") -> None:
        if isinstance(data, bytes):
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType=content_type)
        else:
            self.client.upload_fileobj(data, self.bucket, self._key(key), ExtraArgs={"ContentType": content_type})

    def download(self, key: str, dest: Path) -> None:
        download_object(self.client, self.bucket, self._key(key), dest)

    def read(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            raise _missing(exc, key) from exc

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def presign(self, key: str, *, ttl_s: int) -> str | None:
        return self.signer.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._key(key)}, ExpiresIn=ttl_s
        )

    def local_path(self, key: str) -> Path | None:
        return None

    def ping(self) -> None:
        self.client.head_bucket(Bucket=self.bucket)


class FileStorage:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"key escapes the storage root: {key!r}")
        return path

    def put(self, key: str, data: bytes | BinaryIO, *, content_type: str = "application/octet-stream") -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data)

    def download(self, key: str, dest: Path) -> None:
        try:
            shutil.copyfile(self._path(key), dest)
        except FileNotFoundError as exc:
            raise ObjectMissing(key) from exc

    def read(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectMissing(key) from exc

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def presign(self, key: str, *, ttl_s: int) -> str | None:
        return None

    def local_path(self, key: str) -> Path | None:
        path = self._path(key)
        return path if path.exists() else None

    def ping(self) -> None:
        if not self.root.is_dir():
            raise OSError(f"storage folder {self.root} is missing")


def download_object(client: BaseClient, bucket: str, key: str, dest: Path) -> None:
    """Download one object; a missing or forbidden object raises ObjectMissing, a busy store its ClientError."""
    try:
        client.download_file(bucket, key, str(dest))
    except ClientError as exc:
        raise _missing(exc, f"s3://{bucket}/{key}: {_code(exc)}") from exc


def head_object(client: BaseClient, bucket: str, key: str) -> ObjectInfo:
    """Size and ETag of an object; missing or forbidden raises ObjectMissing, a busy store its ClientError."""
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        raise _missing(exc, f"s3://{bucket}/{key}: {_code(exc)}") from exc
    return ObjectInfo(key=key, size=head["ContentLength"], etag=head["ETag"].strip('"'))


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", exc))


def make_storage(settings: Settings) -> Storage:
    """Build the storage named by OCRQ_STORAGE_URL (s3://bucket[/prefix] or file:///dir)."""
    url = settings.resolved_storage_url
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        prefix = parsed.path.lstrip("/")
        public = settings.s3_public_endpoint_url
        return S3Storage(s3_client(settings), parsed.netloc, f"{prefix.rstrip('/')}/" if prefix else "",
                         signer=s3_client(settings, endpoint_url=public) if public else None)
    if parsed.scheme == "file":
        return FileStorage(Path(unquote(parsed.path)))
    raise ValueError(f"OCRQ_STORAGE_URL must be s3://bucket or file:///dir, got {url!r}")
