"""The checks tests use to tell a certificate the real cert-manager issued (kubegpu_devcluster.cert_manager): no
cluster, certificates made here."""
from __future__ import annotations

import base64
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubegpu_devcluster.cert_manager import bundles, secret_problems

DNS = ["kserve-webhook-server-service.kserve.svc"]
CERTIFICATE = {"metadata": {"name": "serving-cert", "namespace": "kserve"},
               "spec": {"dnsNames": DNS, "secretName": "kserve-webhook-server-cert"}}


def _issue(names, signer=None):
    """(certificate, key); signer (certificate, key) signs it, else it signs itself."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "ca")])
    issuer_cert, issuer_key = signer or (None, key)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer_cert.subject if issuer_cert else subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now)
               .not_valid_after(now + datetime.timedelta(days=1)))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def _secret(cert, key, ca, name="serving-cert", kind="kubernetes.io/tls"):
    pem = {"tls.crt": cert.public_bytes(serialization.Encoding.PEM),
           "tls.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()),
           "ca.crt": ca.public_bytes(serialization.Encoding.PEM)}
    return {"type": kind, "metadata": {"annotations": {"cert-manager.io/certificate-name": name}},
            "data": {k: base64.b64encode(v).decode() for k, v in pem.items()}}


def test_a_self_signed_certificate_for_the_asked_names_passes():
    cert, key = _issue(DNS)
    assert secret_problems(_secret(cert, key, cert), CERTIFICATE) == []


def test_a_certificate_signed_by_its_ca_passes():
    ca, ca_key = _issue([])
    cert, key = _issue(DNS, (ca, ca_key))
    assert secret_problems(_secret(cert, key, ca), CERTIFICATE) == []


def test_each_departure_is_named():
    cert, dummy_key = _issue(["other.kserve.svc"])
    stranger, dummy = _issue([])
    other_key = ec.generate_private_key(ec.SECP256R1())
    problems = secret_problems(_secret(cert, other_key, stranger, name="someone-else", kind="Opaque"), CERTIFICATE)
    assert problems[0] == "type 'Opaque', not kubernetes.io/tls"
    assert problems[1] == "annotation cert-manager.io/certificate-name is not 'serving-cert'"
    assert problems[2] == f"tls.crt names ['other.kserve.svc'], the Certificate asks for {DNS}"
    assert problems[3] == "tls.key is not the key of tls.crt"
    assert problems[4].startswith("tls.crt is not signed by ca.crt (")
    assert len(problems) == 5


def test_an_unreadable_secret_is_named():
    problems = secret_problems({"type": "kubernetes.io/tls", "metadata": {}, "data": {}}, CERTIFICATE)
    assert problems[-1].startswith("tls.crt, ca.crt or tls.key unreadable")


def test_bundles_read_every_place_the_injector_writes():
    webhooks = {"kind": "ValidatingWebhookConfiguration",
                "webhooks": [{"clientConfig": {"caBundle": "QQ=="}}, {"clientConfig": {}}]}
    assert bundles(webhooks) == ["QQ==", ""]
    assert bundles({"kind": "MutatingWebhookConfiguration", "webhooks": []}) == []
    assert bundles({"kind": "APIService", "spec": {"caBundle": "Qg=="}}) == ["Qg=="]
    crd = {"kind": "CustomResourceDefinition",
           "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"caBundle": "Qw=="}}}}}
    assert bundles(crd) == ["Qw=="]
    assert bundles({"kind": "CustomResourceDefinition", "spec": {"conversion": {"strategy": "None"}}}) == [""]
    assert bundles({"kind": "ConfigMap"}) == []
