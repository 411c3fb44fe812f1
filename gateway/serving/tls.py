"""A self-signed TLS certificate for local use (``jobgate dev --tls``).

HTTP/3 runs over QUIC, which is always encrypted, so trying it locally needs a certificate.
:func:`self_signed` makes one for ``localhost`` and the loopback addresses (an ECDSA P-256 key,
valid for 90 days) and keeps it in a folder, made again once it is within a week of expiring.
Clients must be told to trust it (``curl --cacert``, ``httpx.Client(verify=...)``): it is for
development only, never for a gateway others reach.
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["CERT_FILE", "KEY_FILE", "self_signed"]

CERT_FILE = "localhost.crt"
KEY_FILE = "localhost.key"
VALIDITY = timedelta(days=90)
RENEW_BEFORE = timedelta(days=7)
NAMES = ("localhost",)
ADDRESSES = ("127.0.0.1", "::1")


def self_signed(folder: Path, now: datetime | None = None) -> tuple[Path, Path]:
    """The certificate and key files in ``folder``, made (or made again) when missing or
    expiring within :data:`RENEW_BEFORE`. The key file is readable by its owner only."""
    now = now or datetime.now(UTC)
    cert_path, key_path = folder / CERT_FILE, folder / KEY_FILE
    if cert_path.exists() and key_path.exists():
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            if cert.not_valid_after_utc - RENEW_BEFORE > now:
                return cert_path, key_path
        except ValueError:
            pass  # unreadable: make a new one
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Jobgate development")])
    alternative = [x509.DNSName(n) for n in NAMES] + [
        x509.IPAddress(ipaddress.ip_address(a)) for a in ADDRESSES
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path.touch(mode=0o600, exist_ok=True)
    key_path.chmod(0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
