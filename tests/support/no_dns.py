"""Name resolution off: IP literals and localhost resolve, any other host name fails as an unknown one would, so
no generated URL leaves the machine. The schema test patches it in; bench/fuzz.py installs it in every server
process through a sitecustomize."""

from __future__ import annotations

import ipaddress
import socket

real_getaddrinfo = socket.getaddrinfo


def literal_addresses_only(host, *args, **kwargs):
    """getaddrinfo for IP literals and localhost; any other name fails as an unknown host would."""
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name != "localhost":
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, "name resolution is off here") from None
    return real_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    socket.getaddrinfo = literal_addresses_only
