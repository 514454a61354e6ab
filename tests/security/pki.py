"""A throwaway test PKI made with ``cryptography``: a CA, a server certificate for 127.0.0.1,
a client certificate, and a rogue CA with its own client certificate."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclasses.dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_client_cert: Path
    rogue_client_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(
    folder: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def make_pki(folder: Path) -> Pki:
    keys = {
        name: ec.generate_private_key(ec.SECP256R1())
        for name in ("ca", "rogue", "server", "client", "rogue_client")
    }
    ca = _cert("test-ca", keys["ca"], None, ca=True)
    rogue = _cert("rogue-ca", keys["rogue"], None, ca=True)
    server = _cert("nats-server", keys["server"], ("test-ca", keys["ca"]), server=True)
    client = _cert("client", keys["client"], ("test-ca", keys["ca"]))
    rogue_client = _cert("rogue-client", keys["rogue_client"], ("rogue-ca", keys["rogue"]))
    ca_path, _ = _write(folder, "ca", ca, keys["ca"])
    _write(folder, "rogue-ca", rogue, keys["rogue"])
    server_cert, server_key = _write(folder, "server", server, keys["server"])
    client_cert, client_key = _write(folder, "client", client, keys["client"])
    rogue_cert, rogue_key = _write(folder, "rogue-client", rogue_client, keys["rogue_client"])
    return Pki(ca_path, server_cert, server_key, client_cert, client_key, rogue_cert, rogue_key)
