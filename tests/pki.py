"""A throwaway PKI for tests and load tests on loopback: a CA, a server certificate for
localhost/127.0.0.1 and a client certificate, written as PEM files (needs `cryptography`)."""
from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def certificate(name: str, issuer=None, issuer_key=None, ca: bool = False):
    """(certificate, key, certificate PEM, key PEM), valid for a day; self-signed without an issuer."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
         .not_valid_after(now + dt.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    cert = b.sign(issuer_key or key, hashes.SHA256())
    pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert, key, pem, key_pem


def make_pki(directory: str | Path) -> dict[str, str]:
    """Write ca, server, server_key, client, client_key PEM files into `directory`; their paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca, ca_key, ca_pem, _ = certificate("windowstore test CA", ca=True)
    _, _, srv_pem, srv_key = certificate("localhost", ca.subject, ca_key)
    _, _, cli_pem, cli_key = certificate("windowstore test client", ca.subject, ca_key)
    files = {"ca": ca_pem, "server": srv_pem, "server_key": srv_key, "client": cli_pem, "client_key": cli_key}
    for name, data in files.items():
        (d / f"{name}.pem").write_bytes(data)
    return {k: str(d / f"{k}.pem") for k in files}
