"""The blocking client's ``http.client`` session over real loopback sockets: what it sends,
connections kept and renewed, and network failures raised as httpx's exceptions."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.serving.tls import self_signed
from sdk import Client
from sdk.blocking import BlockingSession, HttpxBlockingSession, open_blocking_session
from tests.support import bind

TASK = (
    b'{"id":"01J00000000000000000000001","queue":"q","name":"n","payload":null,'
    b'"state":"queued","max_attempts":5,"created_at":"2030-01-01T00:00:00Z",'
    b'"run_at":"2030-01-01T00:00:00Z"}'
)


class Server:
    """A bare HTTP/1.1 server in a thread: each connection reads requests and answers each
    with ``TASK``; ``close_after`` answers per connection, then it closes it (no notice)."""

    def __init__(
        self, close_after: int = 0, answer: bool = True, tls: ssl.SSLContext | None = None
    ) -> None:
        self.tls = tls
        self.listener = bind()
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.close_after = close_after
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _keep(self, conn: socket.socket) -> bool:
        """Track ``conn`` for :meth:`stop`; False (and ``conn`` closed) once stopped. Every
        socket is closed here or by ``stop()``, in this test, never left to be collected:
        a socket dropped by a server thread late (an accept that returned as ``stop()``
        ran) warned as unclosed in whatever test ran then."""
        with self._lock:
            if not self._stopped:
                self._open.append(conn)
                return True
        conn.close()
        return False

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if not self._keep(conn):
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.tls is not None:  # the wrapped socket takes over the connection
            try:
                conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            except OSError:  # stopped meanwhile
                conn.close()
                return
            if not self._keep(conn):
                return
        hung_up = False
        try:
            if self.tls is not None:
                conn.do_handshake()  # OSError when the client refuses our certificate
            hung_up = self._answer(conn)
        except OSError:
            pass
        finally:
            conn.close()
        if hung_up:
            self.closed += 1

    def _answer(self, conn: socket.socket) -> bool:
        """Answer the requests on ``conn`` until the client leaves (False) or ``close_after``
        answers were sent (True: the caller closes the connection)."""
        buffer, answered = b"", 0
        while True:
            data = conn.recv(65536)
            if not data:
                return False
            buffer += data
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.lower().split(b"\r\n")
                        if line.startswith(b"content-length:")
                    ),
                    0,
                )
                if len(rest) < length:
                    break
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buffer = rest[length:]
                if not self.answer:
                    continue
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(TASK), TASK)
                )
                answered += 1
                if self.close_after and answered >= self.close_after:
                    return True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            conns, self._open = self._open, []
        with contextlib.suppress(OSError):  # wakes the accept (a close alone does not)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for conn in conns:
            conn.close()


@pytest.fixture
def server_factory() -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def make(**options: Any) -> Server:
        made.append(Server(**options))
        return made[-1]

    yield make
    for server in made:
        server.stop()


def test_client_sends_path_query_key_and_body_on_one_kept_connection(
    server_factory: Callable[..., Server],
) -> None:
    server = server_factory()
    with Client(server.url + "/prefix/", "key-1") as client:
        assert isinstance(client._http, BlockingSession)
        client.get_task("a/b c", wait=1.5)
        client.enqueue("q", "n", {"x": 1})
    first, second = server.requests
    assert first.startswith(b"GET /prefix/v1/tasks/a%2Fb%20c?wait=1.5 HTTP/1.1\r\n")
    assert b"\r\nauthorization: Bearer key-1\r\n" in first
    assert second.startswith(b"POST /prefix/v1/queues/q/tasks HTTP/1.1\r\n")
    assert b'"payload":{"x":1}' in second
    assert server.connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced(
    server_factory: Callable[..., Server],
) -> None:
    server = server_factory(close_after=1)
    with Client(server.url, "key") as client:
        for done in range(1, 4):
            assert client.get_task("t").id == "01J00000000000000000000001"
            deadline = time.monotonic() + 10
            while server.closed < done:  # closed by now, while the client holds it idle
                assert time.monotonic() < deadline, "the server did not close the connection"
                time.sleep(0.005)
    assert server.connections == 3


def test_a_refused_connection_is_httpx_connect_error() -> None:
    sock = bind()
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with Client(f"http://127.0.0.1:{port}", "key") as client, pytest.raises(httpx.ConnectError):
        client.list_queues()


def test_a_silent_server_is_read_timeout_and_its_connection_is_not_kept(
    server_factory: Callable[..., Server],
) -> None:
    server = server_factory(answer=False)
    session = BlockingSession(server.url)
    with pytest.raises(httpx.ReadTimeout):
        session.request("GET", "/v1/queues", timeout=0.2)
    assert session._idle == []
    session.close()


def test_a_transport_or_a_proxy_in_the_environment_sends_through_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = open_blocking_session("http://gw.test", None, None)
    assert isinstance(plain, BlockingSession)
    given = open_blocking_session("http://gw.test", None, httpx.HTTPTransport())
    assert isinstance(given, HttpxBlockingSession)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("NO_PROXY", "local.test")
    assert isinstance(open_blocking_session("http://gw.test", None, None), HttpxBlockingSession)
    assert isinstance(open_blocking_session("http://local.test", None, None), BlockingSession)
    for session in (plain, given):
        session.close()


def test_https_verifies_the_certificate_as_httpx_does(
    server_factory: Callable[..., Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = server_factory(tls=tls)
    url = f"https://localhost:{server.port}"
    with Client(url, "key") as client, pytest.raises(httpx.ConnectError):
        client.get_task("t")  # signed by no authority it trusts
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with Client(url, "key") as client:
        assert client.get_task("t").id == "01J00000000000000000000001"
