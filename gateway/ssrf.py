"""Which addresses the gateway may push to.

Endpoint URLs come from API users, and the gateway POSTs to them from inside the network, so
they are checked twice: when registered (the host's current addresses) and at every connection
(:class:`GuardedResolver`, since DNS may change). Link-local addresses (cloud metadata lives at
169.254.169.254), multicast, unspecified and reserved addresses are always refused; loopback and
private ranges only when ``allow_private_endpoints`` is set. Redirects are never followed.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(Exception):
    """An endpoint resolves to an address the gateway must not reach."""


def refusal(address: IPAddress, allow_private: bool) -> str | None:
    """Why the address is refused, or None when it is allowed."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address.is_link_local:
        return "link-local addresses (cloud metadata) are never allowed"
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return "multicast, unspecified and reserved addresses are never allowed"
    if (address.is_loopback or address.is_private) and not allow_private:
        return (
            "loopback and private addresses are refused unless "
            "JOBGATE_ALLOW_PRIVATE_ENDPOINTS is set"
        )
    return None


def parse_endpoint_url(url: str) -> tuple[str, int]:
    """The host and port of an endpoint URL; raises ValueError when it cannot be one."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("must name a host")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials")
    if parts.fragment:
        raise ValueError("must not have a #fragment")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        raise ValueError("has an invalid port") from e
    return parts.hostname, port


async def check_endpoint_url(url: str, allow_private: bool) -> None:
    """Raise ValueError (with the reason) unless every address of the URL's host is allowed."""
    host, port = parse_endpoint_url(url)
    try:
        infos = await _getaddrinfo(host, port)
    except OSError as e:
        raise ValueError(f"host '{host}' does not resolve: {e}") from e
    for info in infos:
        reason = refusal(ipaddress.ip_address(info[4][0]), allow_private)
        if reason:
            raise ValueError(f"resolves to {info[4][0]}: {reason}")


async def _getaddrinfo(host: str, port: int) -> list[Any]:
    import asyncio

    loop = asyncio.get_running_loop()
    return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that drops refused addresses, so DNS changes cannot reach them."""

    def __init__(self, allow_private: bool) -> None:
        self._inner = DefaultResolver()
        self._allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed = [
            r
            for r in results
            if refusal(ipaddress.ip_address(r["host"]), self._allow_private) is None
        ]
        if not allowed:
            raise AddressRefused(f"{host} resolves only to addresses the gateway may not reach")
        return allowed

    async def close(self) -> None:
        await self._inner.close()
