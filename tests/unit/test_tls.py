"""The development certificate of ``jobgate dev --tls``: made for localhost and the loopback
addresses, kept, made again when it nears its end, its key private to its owner."""

from __future__ import annotations

import ipaddress
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509

from gateway.serving.tls import VALIDITY, self_signed


def test_the_certificate_names_localhost_and_loopback_and_is_kept(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    made = x509.load_pem_x509_certificate(cert.read_bytes())
    names = made.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    before = cert.read_bytes()
    assert self_signed(tmp_path) == (cert, key)
    assert cert.read_bytes() == before  # reused while valid


def test_one_near_its_end_or_unreadable_is_made_again(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    cert, _ = self_signed(tmp_path, now=now - VALIDITY + timedelta(days=3))
    old = cert.read_bytes()
    self_signed(tmp_path, now=now)
    assert cert.read_bytes() != old
    cert.write_text("not a certificate")
    self_signed(tmp_path, now=now)
    assert x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc > now
