"""Which addresses the gateway may push to.

Endpoint URLs come from API users, and the gateway POSTs to them from inside the network, so
they are checked when registered (the host's current addresses) and again at every connection:
:class:`GuardedResolver` drops refused addresses from each DNS answer (DNS may change, or be
rebound on purpose), and :func:`guarded_socket_factory` judges the address of every socket
before it connects (that covers IP-literal URLs, which aiohttp does not resolve). Redirects are
never followed.

The rule follows the IANA IPv4 and IPv6 Special-Purpose Address Registries (and the IPv6
Address Space registry): an address is allowed when it is globally reachable. Every entry that
is not is refused, in one of three kinds:

- link-local and known cloud metadata addresses: never allowed;
- multicast, unspecified ("this network") and reserved addresses (including documentation
  ranges and deprecated blocks): never allowed;
- every other non-public range (loopback, private-use, shared/carrier-grade NAT, unique-local,
  site-local, benchmarking, IETF protocol assignments, ...): only with
  ``allow_private_endpoints``.

IPv6 forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo) are
decoded and the embedded address is judged too; the strictest verdict wins.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.connector import AddrInfoType, SocketFactoryType
from aiohttp.resolver import DefaultResolver

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(PermissionError):
    """A connection would reach an address the gateway must not reach.

    An OSError, so aiohttp and happy eyeballs treat it like any failed connection attempt;
    aiohttp wraps it in a ``ClientConnectorError`` whose ``os_error`` it is.
    """


class Kind(enum.IntEnum):
    """How an address range is treated, in increasing strictness."""

    PUBLIC = 0
    PRIVATE = 1  # not public: allowed only with allow_private_endpoints
    FORBIDDEN = 2  # multicast, unspecified, reserved: never
    LINK_LOCAL = 3  # link-local and cloud metadata: never


RULES = {
    Kind.PRIVATE: (
        "loopback, private and other non-public addresses are refused unless "
        "JOBGATE_ALLOW_PRIVATE_ENDPOINTS is set"
    ),
    Kind.FORBIDDEN: "multicast, unspecified and reserved addresses are never allowed",
    Kind.LINK_LOCAL: "link-local and cloud metadata addresses are never allowed",
}


@dataclass(frozen=True)
class Range:
    network: IPNetwork
    kind: Kind
    name: str


def _ranges(*entries: tuple[str, Kind, str]) -> tuple[Range, ...]:
    """The entries, most specific first, so the first one that contains an address decides."""
    ranges = [Range(ipaddress.ip_network(net), kind, name) for net, kind, name in entries]
    return tuple(sorted(ranges, key=lambda r: r.network.prefixlen, reverse=True))


PUBLIC, PRIVATE, FORBIDDEN, LINK_LOCAL = Kind.PUBLIC, Kind.PRIVATE, Kind.FORBIDDEN, Kind.LINK_LOCAL

# IANA IPv4 Special-Purpose Address Registry; an address in no entry is public.
IPV4_RANGES = _ranges(
    ("0.0.0.0/8", FORBIDDEN, '"this network"'),
    ("10.0.0.0/8", PRIVATE, "private-use"),
    ("100.64.0.0/10", PRIVATE, "shared address space (carrier-grade NAT)"),
    ("100.100.100.200/32", LINK_LOCAL, "cloud metadata (Alibaba Cloud)"),
    ("127.0.0.0/8", PRIVATE, "loopback"),
    ("169.254.0.0/16", LINK_LOCAL, "link-local (cloud metadata)"),
    ("172.16.0.0/12", PRIVATE, "private-use"),
    ("192.0.0.0/24", PRIVATE, "IETF protocol assignments"),
    ("192.0.0.9/32", PUBLIC, "Port Control Protocol anycast"),
    ("192.0.0.10/32", PUBLIC, "TURN anycast"),
    ("192.0.0.192/32", LINK_LOCAL, "cloud metadata (Oracle Cloud)"),
    ("192.0.2.0/24", FORBIDDEN, "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", FORBIDDEN, "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", PRIVATE, "private-use"),
    ("198.18.0.0/15", PRIVATE, "benchmarking"),
    ("198.51.100.0/24", FORBIDDEN, "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", FORBIDDEN, "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", FORBIDDEN, "multicast"),
    ("240.0.0.0/4", FORBIDDEN, "reserved"),
    ("255.255.255.255/32", FORBIDDEN, "limited broadcast"),
)

# IANA IPv6 Special-Purpose Address Registry, over the IPv6 Address Space registry: only
# 2000::/3 is global unicast; what is neither there nor below is reserved by the IETF.
IPV6_RANGES = _ranges(
    ("::/0", FORBIDDEN, "reserved by the IETF"),
    ("::/128", FORBIDDEN, "unspecified"),
    ("::1/128", PRIVATE, "loopback"),
    ("::/96", FORBIDDEN, "IPv4-compatible (deprecated)"),
    ("::ffff:0:0/96", PUBLIC, "IPv4-mapped"),  # judged by the embedded address
    ("64:ff9b::/96", PUBLIC, "NAT64 well-known prefix"),  # and by the embedded address
    ("64:ff9b:1::/48", PRIVATE, "local-use IPv4/IPv6 translation"),
    ("100::/64", FORBIDDEN, "discard-only"),
    ("100:0:0:1::/64", FORBIDDEN, "dummy prefix"),
    ("2000::/3", PUBLIC, "global unicast"),
    ("2001::/23", PRIVATE, "IETF protocol assignments"),
    ("2001::/32", PUBLIC, "Teredo"),  # judged by the embedded addresses
    ("2001:1::1/128", PUBLIC, "Port Control Protocol anycast"),
    ("2001:1::2/128", PUBLIC, "TURN anycast"),
    ("2001:1::3/128", PUBLIC, "DNS-SD service registration anycast"),
    ("2001:2::/48", PRIVATE, "benchmarking"),
    ("2001:3::/32", PUBLIC, "AMT"),
    ("2001:4:112::/48", PUBLIC, "AS112-v6"),
    ("2001:10::/28", FORBIDDEN, "deprecated ORCHID"),
    ("2001:20::/28", PUBLIC, "ORCHIDv2"),
    ("2001:30::/28", PUBLIC, "drone remote ID tags"),
    ("2001:db8::/32", FORBIDDEN, "documentation"),
    ("2002::/16", PUBLIC, "6to4"),  # judged by the embedded address
    ("3fff::/20", FORBIDDEN, "documentation"),
    ("5f00::/16", PRIVATE, "segment routing (SRv6) SIDs"),
    ("fc00::/7", PRIVATE, "unique-local"),
    ("fd00:ec2::254/128", LINK_LOCAL, "cloud metadata (AWS)"),
    ("fe80::/10", LINK_LOCAL, "link-local"),
    ("fec0::/10", PRIVATE, "site-local (deprecated)"),
    ("ff00::/8", FORBIDDEN, "multicast"),
)

_PUBLIC_V4 = Range(ipaddress.ip_network("0.0.0.0/0"), PUBLIC, "public")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_LOCAL_NAT64 = "local-use NAT64"


def classify(address: IPAddress) -> Range:
    """The most specific registry entry that holds the address (the address itself only)."""
    if isinstance(address, ipaddress.IPv4Address):
        return next((r for r in IPV4_RANGES if address in r.network), _PUBLIC_V4)
    return next(r for r in IPV6_RANGES if address in r.network)


def embedded_ipv4(address: ipaddress.IPv6Address) -> Iterator[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the form that carries it."""
    if address.ipv4_mapped is not None:
        yield "IPv4-mapped", address.ipv4_mapped
    elif address.sixtofour is not None:
        yield "6to4", address.sixtofour
    elif address.teredo is not None:
        server, client = address.teredo  # the client's address comes un-obfuscated
        yield "Teredo client", client
        yield "Teredo server", server
    elif address in _NAT64:
        yield "NAT64", _low32(address)
    elif address in _NAT64_LOCAL:
        # The network picks the layout (RFC 8215): a /96 inside the /48 puts the address in the
        # last 32 bits; the /48 layout of RFC 6052 puts it around the octet at bits 64-71.
        bits = int(address)
        yield _LOCAL_NAT64, _low32(address)
        yield _LOCAL_NAT64, ipaddress.IPv4Address((bits >> 64 & 0xFFFF) << 16 | bits >> 40 & 0xFFFF)
    elif address in _COMPATIBLE and int(address) > 1:
        yield "IPv4-compatible", _low32(address)


def _low32(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)


def verdict(address: IPAddress) -> tuple[Kind, str]:
    """The strictest of the address's own entry and those of the IPv4 addresses it embeds,
    with a description of what decided it."""
    own = classify(address)
    worst = (own.kind, own.name)
    if isinstance(address, ipaddress.IPv6Address):
        for form, inner in embedded_ipv4(address):
            entry = classify(inner)
            if form == _LOCAL_NAT64 and entry.kind is not Kind.LINK_LOCAL:
                # Either layout's reading may be meaningless, so only the metadata rule is
                # worth a false refusal; the prefix itself is already not public.
                continue
            if entry.kind > worst[0]:
                worst = (entry.kind, f"{form} address of {inner}, {entry.name}")
    return worst


def refusal(address: IPAddress, allow_private: bool) -> str | None:
    """Why the address is refused, or None when it is allowed."""
    kind, what = verdict(address)
    if kind is Kind.PUBLIC or (kind is Kind.PRIVATE and allow_private):
        return None
    return f"{RULES[kind]} ({what})"


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


async def check_endpoint_url(
    url: str, allow_private: bool, resolver: AbstractResolver | None = None
) -> None:
    """Raise ValueError (with the reason) unless every address of the URL's host is allowed.

    The host is looked up with ``getaddrinfo``, or with ``resolver`` when one is given."""
    host, port = parse_endpoint_url(url)
    try:
        addresses = await _addresses(host, port, resolver)
    except OSError as e:
        raise ValueError(f"host '{host}' does not resolve: {e}") from e
    for address in addresses:
        reason = refusal(ipaddress.ip_address(address), allow_private)
        if reason:
            raise ValueError(f"resolves to {address}: {reason}")


async def _addresses(host: str, port: int, resolver: AbstractResolver | None) -> list[str]:
    if resolver is not None:
        return [r["host"] for r in await resolver.resolve(host, port, socket.AF_UNSPEC)]
    loop = asyncio.get_running_loop()
    infos: list[Any] = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that drops refused addresses, so DNS changes cannot reach them.

    ``inner`` does the lookups (aiohttp's default resolver unless given)."""

    def __init__(self, allow_private: bool, inner: AbstractResolver | None = None) -> None:
        self._inner = inner or DefaultResolver()
        self._allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed: list[ResolveResult] = []
        refused: list[str] = []
        for r in results:
            reason = refusal(ipaddress.ip_address(r["host"]), self._allow_private)
            if reason:
                refused.append(f"{r['host']}: {reason}")
            else:
                allowed.append(r)
        if not allowed:
            raise AddressRefused(
                f"{host} resolves only to addresses the gateway may not reach "
                f"({'; '.join(refused) or 'no addresses'})"
            )
        return allowed

    async def close(self) -> None:
        await self._inner.close()


def guarded_socket_factory(allow_private: bool) -> SocketFactoryType:
    """A socket factory for aiohttp's connector that refuses to open a socket to a refused
    address: the last check, on the address actually connected to, whatever resolved it."""

    def new_socket(addr_info: AddrInfoType) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        address = str(sockaddr[0])
        reason = refusal(ipaddress.ip_address(address), allow_private)
        if reason:
            raise AddressRefused(f"{address}: {reason}")
        return socket.socket(family=family, type=type_, proto=proto)

    return new_socket
