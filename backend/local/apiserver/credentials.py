"""The API server's credentials and the kubeconfig that hands them to clients.

A CA and a serving certificate for 127.0.0.1 / ::1 / localhost, and a bearer token, all made
once per state root and kept in `<root>/pki` (private files 0600), so a kubeconfig written
earlier keeps working after the controller restarts. The kubeconfig at `<home>/kubeconfig`
(0600) has one cluster, user and context, all named `kfcockpit`, namespace `default`; nothing
here touches ~/.kube/config.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml

from training.atomic import write_atomic

CONTEXT = "kfcockpit"
_VALID_DAYS = 3650


@dataclass(frozen=True)
class Credentials:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    token: str


def _write_private(path: Path, data: bytes) -> None:
    write_atomic(path, data)
    os.chmod(path, 0o600)


def _make_pki(directory: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    until = now + datetime.timedelta(days=_VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kfcockpit-ca")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(until)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
             x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kfcockpit-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / "ca.crt", ca_cert.public_bytes(pem))
    _write_private(directory / "server.key", key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    write_atomic(directory / "server.crt", cert.public_bytes(pem))


def load_or_create(directory: Path) -> Credentials:
    if not (directory / "server.crt").exists():
        _make_pki(directory)
    token_file = directory / "token"
    if not token_file.exists():
        _write_private(token_file, secrets.token_urlsafe(32).encode())
    return Credentials(directory / "ca.crt", directory / "server.crt", directory / "server.key",
                       token_file.read_text().strip())


def kubeconfig(server: str, credentials: Credentials) -> dict:
    ca = base64.b64encode(credentials.ca_cert.read_bytes()).decode()
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": CONTEXT, "user": {"token": credentials.token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"}}],
        "current-context": CONTEXT,
    }


def write_kubeconfig(path: Path, server: str, credentials: Credentials) -> None:
    _write_private(path, yaml.safe_dump(kubeconfig(server, credentials), sort_keys=False).encode())
