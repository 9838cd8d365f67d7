"""What a batch does with each listed object: take it or skip it, name its result, recognise a result already made.

Pure functions over keys and strings; no database, no S3.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import posixpath
from dataclasses import dataclass
from urllib.parse import urlparse

from common.jobs.results import extension

MANIFEST_NAME = "_manifest.jsonl"
# Judged by extension: a listing carries no Content-Type, and a HEAD per object would cost more than the listing.
DOCUMENT_EXTENSIONS = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".jpe", ".webp", ".bmp", ".gif", ".tif", ".tiff"})


@dataclass(frozen=True)
class S3Prefix:
    """A bucket and a folder-like key prefix: empty (the whole bucket) or ending in '/'."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> S3Prefix:
        """s3://bucket/some/folder (trailing slash optional) as a folder prefix; ValueError if not s3://."""
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc or parsed.query or parsed.fragment:
            raise ValueError(f"not an s3://bucket/prefix URI: {uri!r}")
        prefix = parsed.path.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        if "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
            raise ValueError(f"the prefix of {uri!r} has empty, '.' or '..' parts")
        return cls(bucket=parsed.netloc, prefix=prefix)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def contains(self, other: S3Prefix) -> bool:
        """True when every key under `other` is also under this prefix."""
        return self.bucket == other.bucket and other.prefix.startswith(self.prefix)


def relative_key(key: str, *, prefix: str) -> str:
    return key[len(prefix):] if key.startswith(prefix) else key


def result_key(relative: str, *, output_prefix: str, output: str, body: bytes = b"") -> str:
    """Where an object's result goes: the output prefix, the key relative to the input, and the format's extension
    (the body's: a csv result of several tables is a zip)."""
    return f"{output_prefix}{relative}.{extension(output, body)}"


def manifest_key(output_prefix: str) -> str:
    return f"{output_prefix}{MANIFEST_NAME}"


def matches(relative: str, *, include: list[str] | None, exclude: list[str] | None) -> bool:
    """Shell-style patterns on the key relative to the input prefix; '*' also crosses '/'."""
    if include and not any(fnmatch.fnmatchcase(relative, pattern) for pattern in include):
        return False
    return not (exclude and any(fnmatch.fnmatchcase(relative, pattern) for pattern in exclude))


def skip_reason(relative: str, *, size: int, include: list[str] | None, exclude: list[str] | None,
                max_bytes: int) -> str | None:
    """Why a listed object is not read, or None when it becomes a job."""
    if relative.endswith("/"):
        return "folder marker"
    if not matches(relative, include=include, exclude=exclude):
        return "excluded by include/exclude patterns"
    extension = posixpath.splitext(relative)[1].lower()
    if extension not in DOCUMENT_EXTENSIONS:
        return f"not a document type ({extension or 'no extension'})"
    if size == 0:
        return "empty object"
    if size > max_bytes:
        return f"{size} bytes is over the limit of {max_bytes}"
    return None


def options_digest(*, output: str, output_prefix: S3Prefix, engine: str, model: str,
                   source_profile: str | None, output_formats: list[str] | None = None) -> str:
    """What shapes an object's result besides its bytes: the same digest means the same result file."""
    shape = {"output": output, "output_prefix": output_prefix.uri, "engine": engine, "model": model,
             "source_profile": source_profile}
    if output_formats:  # only when asked for, so batches from before output_formats keep their digests
        shape["output_formats"] = sorted(output_formats)
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def fingerprint(*, tenant_id: str, bucket: str, key: str, etag: str, options: str) -> str:
    """One object version read with one set of options, for one tenant."""
    return hashlib.sha256("\n".join((tenant_id, bucket, key, etag, options)).encode()).hexdigest()
