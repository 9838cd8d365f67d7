"""Outbound request guard: http(s) only, public addresses only, checked after DNS and on every redirect."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = frozenset({"http", "https"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "ocrq"

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Checked in this order, so 169.254.169.254 is named link-local rather than private.
_REFUSED_KINDS = (
    ("is_unspecified", "unspecified"),
    ("is_loopback", "loopback"),
    ("is_link_local", "link-local (cloud metadata)"),
    ("is_multicast", "multicast"),
    ("is_private", "private"),
    ("is_reserved", "reserved"),
    ("is_site_local", "site-local"),
)
# IANA's IETF protocol assignments, which the ipaddress tables of CPython before 3.11.10 / 3.12.4
# (gh-113171) call global. No receiver of ours lives there.
_SPECIAL_ON_OLD_TABLES = (ipaddress.ip_network("192.0.0.0/24"),)


class UrlRefused(ValueError):
    """The URL may not be requested; the message says why."""


class FetchError(Exception):
    """A permitted request that gave no usable body."""


class FetchFailed(FetchError):
    """The server answered with a non-2xx status, or the connection failed (status None)."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


class FetchTimeout(FetchFailed):
    """The request ran past its total time cap."""


class FetchTooLarge(FetchError):
    """The body is larger than the size cap."""


@dataclass(frozen=True)
class Fetched:
    """A fetched body with its content type and the URL it finally came from."""

    content: bytes
    content_type: str | None
    final_url: str


def check_url(url: str, *, allowlist: Sequence[str]) -> None:
    """Raise UrlRefused unless the URL is http(s) and every address its host resolves to is public or allowlisted."""
    _resolve_checked(_parse(url), allowlist=allowlist)


@contextmanager
def open_checked(
    *,
    method: str,
    url: str,
    allowlist: Sequence[str],
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
) -> Iterator[httpx.Response]:
    """Check the URL, send one request pinned to the checked address, and yield the unread streaming response."""
    target = _parse(url)
    address = _resolve_checked(target, allowlist=allowlist)
    host = target.raw_host.decode("ascii")
    # Connect to the address just checked rather than resolving again (DNS rebinding);
    # the Host header and TLS SNI/certificate check still use the name.
    pinned = target.copy_with(host=str(address))
    with httpx.Client(
        transport=_DeadlineTransport(time.monotonic() + timeout_s),
        timeout=timeout_s,
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
    ) as client:
        request = client.build_request(
            method,
            pinned,
            headers={"Host": target.netloc.decode("ascii"), **(headers or {})},
            content=content,
            extensions={"sni_hostname": host},
        )
        response = client.send(request, stream=True, follow_redirects=False)
        try:
            yield response
        finally:
            response.close()


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by one deadline, so a peer sending a byte at a time
    cannot stretch a request past its time cap (httpx's own timeouts bound each operation, not the whole)."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: float) -> None:
        self._stream, self._deadline = stream, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        left = _left(self._deadline, timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left), self._deadline)

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, deadline: float) -> None:
        self._backend, self._deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None) -> httpcore.NetworkStream:
        left = _left(self._deadline, timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, left, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, path, timeout=None, socket_options=None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through the outbound guard")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _left(deadline: float, timeout: float | None, error: type[Exception]) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the request's total time cap has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's own transport (no retries, no proxies from the environment) over the deadline backend."""

    def __init__(self, deadline: float) -> None:
        super().__init__(trust_env=False, retries=0)
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(trust_env=False),
                                             network_backend=_DeadlineBackend(deadline))


def read_capped(response: httpx.Response, *, max_bytes: int, deadline: float | None = None) -> tuple[bytes, bool]:
    """Read at most max_bytes of the body, flagging whether more was there; FetchTimeout past the deadline."""
    chunks: list[bytes] = []
    total = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            return b"".join(chunks)[:max_bytes], True
        if deadline is not None and time.monotonic() > deadline:
            raise FetchTimeout("timed out while reading the body")
    return b"".join(chunks), False


def fetch(
    url: str,
    *,
    allowlist: Sequence[str],
    max_bytes: int,
    timeout_s: float,
    max_redirects: int,
) -> Fetched:
    """GET a URL through the guard, re-checking every redirect, capped in size and total time."""
    deadline = time.monotonic() + timeout_s
    current = url
    for _ in range(max_redirects + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FetchTimeout(f"timed out after {timeout_s:g}s")
        with _as_fetch_errors(timeout_s), open_checked(
            method="GET", url=current, allowlist=allowlist, timeout_s=remaining
        ) as response:
            location = response.headers.get("location")
            if response.status_code in REDIRECT_STATUSES and location:
                current = _join(current, location)
                continue
            if not 200 <= response.status_code < 300:
                raise FetchFailed(f"HTTP {response.status_code} from {current}", status=response.status_code)
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise FetchTooLarge(f"Content-Length {declared} exceeds the {max_bytes}-byte limit")
            content, overflowed = read_capped(response, max_bytes=max_bytes, deadline=deadline)
            if overflowed:
                raise FetchTooLarge(f"body exceeds the {max_bytes}-byte limit")
            return Fetched(content=content, content_type=response.headers.get("content-type"), final_url=current)
    raise UrlRefused(f"too many redirects (more than {max_redirects})")


def _parse(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, UnicodeError) as exc:
        raise UrlRefused(f"invalid URL: {exc}") from None
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise UrlRefused(f"scheme not allowed: {parsed.scheme or 'none'} (only http and https)")
    if parsed.userinfo:
        raise UrlRefused("credentials in URL")
    if not parsed.raw_host:
        raise UrlRefused("URL has no host")
    return parsed


def _join(base: str, location: str) -> str:
    try:
        return str(httpx.URL(base).join(location))
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise UrlRefused(f"invalid redirect location: {exc}") from None


def _resolve_checked(url: httpx.URL, *, allowlist: Sequence[str]) -> IPAddress:
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise UrlRefused(f"unresolvable host {host}") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))
    if not addresses:
        raise UrlRefused(f"unresolvable host {host}")
    networks = [ipaddress.ip_network(item, strict=False) for item in allowlist]
    for address in addresses:
        reason = _refusal(address, networks)
        if reason:
            raise UrlRefused(f"{host} resolves to {reason}")
    return addresses[0]


def _refusal(address: IPAddress, networks: Sequence[IPNetwork]) -> str | None:
    embedded = _embedded_ipv4(address)
    candidates = [address] if embedded is None else [address, embedded]
    if any(c in n for c in candidates for n in networks if c.version == n.version):
        return None
    target = address if embedded is None else embedded
    for attribute, kind in _REFUSED_KINDS:
        if getattr(target, attribute, False):
            return f"{kind} address {target}"
    if not target.is_global or any(target in n for n in _SPECIAL_ON_OLD_TABLES if n.version == target.version):
        return f"non-public address {target}"
    return None


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64), which is where the packet really goes."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@contextmanager
def _as_fetch_errors(timeout_s: float) -> Iterator[None]:
    try:
        yield
    except httpx.TimeoutException:
        raise FetchTimeout(f"timed out after {timeout_s:g}s") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"connection failed: {exc}") from None
