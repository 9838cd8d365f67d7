"""Which listed objects a batch takes, where their results go, and when an earlier result counts."""

from __future__ import annotations

import pytest

from common.batches.objects import (
    S3Prefix,
    fingerprint,
    manifest_key,
    matches,
    options_digest,
    relative_key,
    result_key,
    skip_reason,
)


def test_prefixes_are_folders():
    assert S3Prefix.parse("s3://scans/2026") == S3Prefix("scans", "2026/")
    assert S3Prefix.parse("s3://scans/2026/") == S3Prefix("scans", "2026/")
    assert S3Prefix.parse("s3://scans") == S3Prefix("scans", "")
    assert S3Prefix.parse("s3://scans/").uri == "s3://scans/"
    for bad in ("http://scans/x", "s3:///x", "scans/x", "s3://b/a//c", "s3://b/a/../c", "s3://b/x?y=1"):
        with pytest.raises(ValueError):
            S3Prefix.parse(bad)


def test_an_output_inside_the_input_is_detected_but_a_sibling_is_not():
    scans = S3Prefix.parse("s3://b/scans/")
    assert scans.contains(S3Prefix.parse("s3://b/scans/out/"))
    assert scans.contains(scans)
    assert S3Prefix.parse("s3://b").contains(S3Prefix.parse("s3://b/results/"))
    assert not scans.contains(S3Prefix.parse("s3://b/scans-out/"))  # a folder, not a string prefix
    assert not scans.contains(S3Prefix.parse("s3://other/scans/out/"))
    assert not S3Prefix.parse("s3://b/scans/out/").contains(scans)


def test_result_keys_mirror_the_relative_key():
    rel = relative_key("scans/2026/a/b/scan.pdf", prefix="scans/2026/")
    assert rel == "a/b/scan.pdf"
    assert result_key(rel, output_prefix="out/", output="markdown") == "out/a/b/scan.pdf.md"
    assert result_key(rel, output_prefix="", output="text") == "a/b/scan.pdf.txt"
    assert result_key(rel, output_prefix="x/", output="json") == "x/a/b/scan.pdf.json"
    assert manifest_key("out/") == "out/_manifest.jsonl"


def test_patterns_match_the_relative_key():
    assert matches("a/b.pdf", include=None, exclude=None)
    assert matches("a/b.pdf", include=["*.pdf"], exclude=None)
    assert not matches("a/b.png", include=["*.pdf"], exclude=None)
    assert not matches("drafts/b.pdf", include=["*.pdf"], exclude=["drafts/*"])
    assert matches("final/b.pdf", include=["*.pdf"], exclude=["drafts/*"])
    assert not matches("a/B.PDF", include=["*.pdf"], exclude=None)  # case matters, as in S3 keys


@pytest.mark.parametrize(("key", "size", "reason"), [
    ("a/scan.PDF", 10, None),
    ("a/photo.jpeg", 10, None),
    ("a/fax.tif", 10, None),
    ("a/notes.txt", 10, "not a document type (.txt)"),
    ("a/README", 10, "not a document type (no extension)"),
    ("a/", 0, "folder marker"),
    ("a/empty.png", 0, "empty object"),
    ("a/huge.pdf", 101, "101 bytes is over the limit of 100"),
    ("drafts/x.pdf", 10, "excluded by include/exclude patterns"),
])
def test_skip_reasons(key, size, reason):
    assert skip_reason(key, size=size, include=None, exclude=["drafts/*"], max_bytes=100) == reason


def test_a_fingerprint_changes_with_the_etag_the_options_and_the_tenant():
    out = S3Prefix.parse("s3://out/r/")
    options = options_digest(output="markdown", output_prefix=out, engine="cpu", model="m", source_profile=None)
    base = dict(tenant_id="t", bucket="b", key="k.png", etag="e1", options=options)
    assert fingerprint(**base) == fingerprint(**base)
    assert fingerprint(**base) != fingerprint(**base | {"etag": "e2"})
    assert fingerprint(**base) != fingerprint(**base | {"tenant_id": "u"})
    for change in ({"output": "text"}, {"output_prefix": S3Prefix.parse("s3://out/other/")}, {"engine": "vllm"},
                   {"source_profile": "archive"}):
        other = options_digest(**{"output": "markdown", "output_prefix": out, "engine": "cpu", "model": "m",
                                  "source_profile": None} | change)
        assert fingerprint(**base) != fingerprint(**base | {"options": other})
