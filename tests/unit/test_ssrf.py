"""SSRF: which addresses the gateway may push to (the IANA special-purpose registries, embedded
IPv4 decoded), at registration and at every connection.

The connection tests push through the real aiohttp session the dispatcher uses, with a stub
resolver (no real DNS) and a loopback server that counts the connections it accepts.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from gateway.dispatch.pusher import Pusher, new_session
from gateway.security.ssrf import check_endpoint_url, refusal
from gateway.services.queues import new_signing_secret
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.records import Lease

NEVER = "never allowed"
UNLESS = "unless JOBGATE_ALLOW_PRIVATE_ENDPOINTS is set"

# Teredo: server 65.54.227.120, client port 40000, client address obfuscated (bits inverted).
TEREDO_PRIVATE_CLIENT = "2001:0:4136:e378:8000:63bf:f5ff:fffe"  # client 10.0.0.1
TEREDO_PUBLIC_CLIENT = "2001:0:4136:e378:8000:63bf:f7f7:f7f7"  # client 8.8.8.8

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "100.63.255.255",  # just below carrier-grade NAT
    "100.128.0.0",  # just above it
    "192.0.0.9",  # Port Control Protocol anycast: globally reachable in the registry
    "2606:4700::1111",
    "2002:808:808::",  # 6to4 of 8.8.8.8
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "::ffff:8.8.8.8",
    TEREDO_PUBLIC_CLIENT,
]

# Not public, refused unless private endpoints are allowed.
NOT_PUBLIC = [
    "127.0.0.1",
    "::1",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "192.0.0.1",  # IETF protocol assignments
    "192.0.0.170",  # NAT64 discovery
    "198.18.0.1",  # benchmarking
    "198.19.255.255",
    "fc00::1",
    "fd12:3456::1",
    "fec0::1",  # site-local (deprecated)
    "2001:2::1",  # benchmarking
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:c0a8::1",  # 6to4 of 192.168.0.0
    "2002:6440:1::",  # 6to4 of 100.64.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b:1:fffe::808:808",  # local-use NAT64 prefix
    TEREDO_PRIVATE_CLIENT,
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
]

# Refused even when private endpoints are allowed.
ALWAYS_REFUSED = [
    "169.254.169.254",  # cloud metadata (link-local)
    "100.100.100.200",  # cloud metadata inside carrier-grade NAT
    "192.0.0.192",  # cloud metadata inside IETF protocol assignments
    "fd00:ec2::254",  # cloud metadata inside unique-local
    "fe80::1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1:fffe::a9fe:a9fe",  # local-use NAT64 of it, /96 layout
    "64:ff9b:1:a9fe:a9:fe00::",  # and in the /48 layout of RFC 6052
    "2002:a9fe:a9fe::",  # 6to4 of it
    "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo client 169.254.169.254
    "0.0.0.0",
    "0.1.2.3",  # "this network"
    "::",
    "224.0.0.1",
    "ff02::1",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.1",  # documentation
    "198.51.100.1",
    "203.0.113.1",
    "2001:db8::1",
    "3fff::1",
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "100::1",  # discard-only
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::8.8.8.8",
    "2002:e000:1::",  # 6to4 of multicast 224.0.0.1
    "4000::1",  # not allocated
]


@pytest.mark.parametrize("address", PUBLIC)
@pytest.mark.parametrize("allow_private", [False, True])
def test_public_addresses_pass(address: str, allow_private: bool) -> None:
    assert refusal(ipaddress.ip_address(address), allow_private) is None


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_non_public_addresses_need_private_endpoints(address: str) -> None:
    reason = refusal(ipaddress.ip_address(address), allow_private=False)
    assert reason is not None
    assert UNLESS in reason
    assert refusal(ipaddress.ip_address(address), allow_private=True) is None


@pytest.mark.parametrize("address", ALWAYS_REFUSED)
@pytest.mark.parametrize("allow_private", [False, True])
def test_special_addresses_are_never_allowed(address: str, allow_private: bool) -> None:
    reason = refusal(ipaddress.ip_address(address), allow_private)
    assert reason is not None
    assert NEVER in reason


def test_the_reason_names_the_embedded_address() -> None:
    reason = refusal(ipaddress.ip_address("64:ff9b::a9fe:a9fe"), allow_private=True)
    assert reason == (
        "link-local and cloud metadata addresses are never allowed "
        "(NAT64 address of 169.254.169.254, link-local (cloud metadata))"
    )


# --- registration and connection ---------------------------------------------------------


class StubResolver(AbstractResolver):
    """Answers every lookup with ``address``, which the test changes; counts lookups."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        return [
            ResolveResult(
                hostname=host,
                host=self.address,
                port=port,
                family=socket.AF_INET6 if ":" in self.address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        pass


@asynccontextmanager
async def counting_server() -> AsyncIterator[tuple[int, list[object]]]:
    """A loopback HTTP server answering 204; yields its port and the peers it accepted."""
    peers: list[object] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername"))
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], peers


def endpoint(url: str) -> EndpointRecord:
    return EndpointRecord(
        id="ep_1",
        queue="q",
        url=url,
        concurrency=1,
        capabilities=[],
        secrets=[new_signing_secret()],
        created_ms=0,
    )


LEASE = Lease(
    queue="q",
    task_id="t1",
    endpoint_id="ep_1",
    token="token",
    name="mod.fn",
    attempt=1,
    max_attempts=None,
    payload_json="{}",
    checkpoint_json=None,
    expires_ms=1_800_000_000_000,
    deadline_ms=1_800_000_060_000,
    traceparent=None,
)


async def test_registration_checks_every_address_the_host_resolves_to() -> None:
    dns = StubResolver("93.184.215.14")
    await check_endpoint_url("https://worker.example/run", allow_private=False, resolver=dns)
    dns.address = "100.100.100.200"
    with pytest.raises(ValueError, match=r"resolves to 100\.100\.100\.200: link-local"):
        await check_endpoint_url("https://worker.example/run", allow_private=True, resolver=dns)
    with pytest.raises(ValueError, match=r"resolves to 2002:7f00:1::: loopback"):
        await check_endpoint_url("http://[2002:7f00:1::]/", allow_private=False)
    assert dns.lookups == ["worker.example", "worker.example"]


@pytest.mark.parametrize("allow_private", [False, True])
async def test_a_name_rebound_to_a_private_address_is_refused_at_dispatch(
    allow_private: bool,
) -> None:
    async with counting_server() as (port, peers):
        url = f"http://rebind.example:{port}/run"
        dns = StubResolver("93.184.215.14")
        # Registration sees a public address...
        await check_endpoint_url(url, allow_private=False, resolver=dns)
        # ...then the name is rebound to loopback before the push.
        dns.address = "127.0.0.1"
        async with new_session(allow_private=allow_private, dns=dns) as session:
            answer = await Pusher(session, "http://gateway").push(LEASE, endpoint(url), 5)
    assert dns.lookups == ["rebind.example", "rebind.example"]
    if allow_private:  # the control: the same setup does reach the server when allowed
        assert (answer.status, len(peers)) == (204, 1)
    else:
        assert answer.status is None
        assert peers == []
        assert answer.failure is not None
        assert "refused: rebind.example resolves only to addresses" in answer.failure
        assert "127.0.0.1: loopback" in answer.failure


async def test_an_ip_literal_is_checked_at_dispatch_too() -> None:
    """aiohttp does not resolve an IP literal; the connector's socket factory still checks it
    (an endpoint stored before the rules changed, or with private endpoints since disabled)."""
    async with counting_server() as (port, peers):
        url = f"http://127.0.0.1:{port}/run"
        async with new_session(allow_private=False) as session:
            answer = await Pusher(session, "http://gateway").push(LEASE, endpoint(url), 5)
        assert answer.status is None
        assert peers == []
        assert answer.failure is not None
        assert answer.failure.startswith("refused: 127.0.0.1: ")
        async with new_session(allow_private=True) as session:
            answer = await Pusher(session, "http://gateway").push(LEASE, endpoint(url), 5)
        assert (answer.status, len(peers)) == (204, 1)
