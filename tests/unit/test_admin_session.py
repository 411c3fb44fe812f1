"""Admin UI sessions: signed, expiring, tied to a configured key; CSRF tokens per session."""

from __future__ import annotations

from gateway.admin.session import SessionCodec, signing_key
from gateway.admin.web import safe_next
from gateway.services.sessions import address_group

KEY = "admin-key-0123456789"
OTHER = "other-key-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def codec(clock: Clock, keys: list[str] | None = None, secret: str | None = None) -> SessionCodec:
    keys = [KEY, OTHER] if keys is None else keys
    return SessionCodec(signing_key(secret, keys), keys, 600, now=clock)


def test_a_session_names_its_key_until_it_expires() -> None:
    clock = Clock()
    sessions = codec(clock)
    token = sessions.open(KEY)
    assert KEY not in token  # only a fingerprint travels
    found = sessions.check(token)
    assert found is not None
    assert found.api_key == KEY
    assert found.expires_at == int(clock.now) + 600
    clock.now += 599
    assert sessions.check(token) is not None
    clock.now += 1
    assert sessions.check(token) is None


def test_a_forged_or_mangled_token_is_refused() -> None:
    clock = Clock()
    sessions = codec(clock)
    token = sessions.open(KEY)
    body, signature = token.split(".")
    for bad in (
        None,
        "",
        body,
        f"{body}.{signature[:-2]}AA",
        f"{body[:-2]}AA.{signature}",
        f"{token}.x",
        "x.y",
    ):
        assert sessions.check(bad) is None, bad
    # signed by another cluster's secret
    assert codec(clock, secret="another-secret-0123456789").check(token) is None


def test_gateways_with_the_same_keys_or_secret_share_sessions() -> None:
    clock = Clock()
    token = codec(clock).open(KEY)
    assert codec(clock, keys=[OTHER, KEY]).check(token) is not None  # order does not matter
    secret = "cluster-secret-0123456789"
    signed = codec(clock, secret=secret).open(KEY)
    assert codec(clock, keys=[KEY, "third-key-0123456789"], secret=secret).check(signed)


def test_removing_the_key_ends_its_sessions() -> None:
    clock = Clock()
    secret = "cluster-secret-0123456789"
    token = codec(clock, secret=secret).open(OTHER)
    assert codec(clock, keys=[KEY], secret=secret).check(token) is None


def test_csrf_tokens_belong_to_one_session() -> None:
    sessions = codec(Clock())
    one = sessions.check(sessions.open(KEY))
    two = sessions.check(sessions.open(KEY))
    assert one is not None
    assert two is not None
    assert one.session_id != two.session_id
    token = sessions.csrf_token(one.session_id)
    assert sessions.csrf_ok(one.session_id, token)
    assert not sessions.csrf_ok(two.session_id, token)
    assert not sessions.csrf_ok(one.session_id, None)
    assert not sessions.csrf_ok(one.session_id, "")


def test_the_sign_in_token_matches_its_nonce_only() -> None:
    sessions = codec(Clock())
    nonce = sessions.new_nonce()
    token = sessions.login_token(nonce)
    assert sessions.login_ok(nonce, token)
    assert not sessions.login_ok(sessions.new_nonce(), token)
    assert not sessions.login_ok(None, token)
    assert not sessions.login_ok(nonce, None)


def test_after_sign_in_only_admin_pages_are_targets() -> None:
    assert safe_next("/admin/tasks?queue=a") == "/admin/tasks?queue=a"
    for outside in (
        None,
        "",
        "/v1/queues",
        "https://evil.example/admin/",
        "//evil.example",
        "/admin",
        "/admin/\\evil",
        "/admin/x?u=https://evil",
    ):
        assert safe_next(outside) == "/admin/queues", outside


def test_sign_in_attempts_are_counted_per_ipv4_address_or_ipv6_slash_64() -> None:
    assert address_group("192.0.2.7") == "192.0.2.7"
    assert address_group("2001:db8:1:2:aaaa::1") == address_group("2001:db8:1:2:bbbb::9")
    assert address_group("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_group("2001:db8:1:3::1") != address_group("2001:db8:1:2::1")
    assert address_group("::ffff:192.0.2.7") == "192.0.2.7"
    assert address_group("") == ""  # no client address (a Unix socket)
    assert address_group("x" * 500) == "x" * 100
