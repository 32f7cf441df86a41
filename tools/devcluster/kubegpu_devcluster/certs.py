"""Certificates for the local cluster: one CA, the API server's serving certificate, one client cert per user.

Users are identified by their client certificate (CN = user name, O = groups), which is how the audit log
tells the collection's requests (the admin) apart from each simulator's.
"""
from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = datetime.timedelta(days=365)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, key, cert) -> None:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.with_suffix(".key").chmod(0o600)
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(cn: str, orgs=()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class CertificateAuthority:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        ca_crt = folder / "ca.crt"
        if ca_crt.exists():
            self.key = serialization.load_pem_private_key((folder / "ca.key").read_bytes(), None)
            self.cert = x509.load_pem_x509_certificate(ca_crt.read_bytes())
            return
        self.key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name("kubegpu-devcluster-ca"))
            .issuer_name(_name("kubegpu-devcluster-ca"))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )
        _write(folder / "ca", self.key, self.cert)

    def issue(self, stem: str, cn: str, orgs=(), server: bool = False) -> Path:
        """Write <stem>.crt/.key signed by this CA, for a server (loopback SANs) or a client user."""
        path = self.folder / stem
        if path.with_suffix(".crt").exists():
            return path
        key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc"),
                     x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        _write(path, key, builder.sign(self.key, hashes.SHA256()))
        return path


def service_account_keys(folder: Path) -> Path:
    """RSA key pair the API server signs and verifies service account tokens with."""
    path = folder / "sa.key"
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                              serialization.NoEncryption())
        )
        path.chmod(0o600)
        (folder / "sa.pub").write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
    return path
