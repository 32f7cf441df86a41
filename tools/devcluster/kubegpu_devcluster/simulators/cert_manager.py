"""cert-manager (v1.x): Issuers become Ready and Certificates get their Secret, as charts that use it expect.

Follows cert-manager's documented behaviour (cert-manager.io/v1 Certificate, Issuer, ClusterIssuer; the CRDs in
shared/crds/cert-manager): a Certificate's spec.secretName gets a kubernetes.io/tls Secret with tls.crt, tls.key
and ca.crt (annotations cert-manager.io/certificate-name, issuer-name, issuer-kind), and the Certificate
condition Ready True (reason Ready, "Certificate is up to date and has not expired") with notBefore, notAfter,
renewalTime and revision. Issuers: selfSigned is Ready at once; ca is Ready once its spec.ca.secretName exists
in its namespace (ClusterIssuer: namespace cert-manager, the default cluster resource namespace), else Ready False
(ErrGetKeyPair). A Certificate whose issuer is missing or not ready stays Ready False (reason Pending /
"Issuing certificate as Secret does not exist") until it is. Keys are ECDSA P-256 (spec.privateKey is not
honoured), dnsNames/commonName/isCA/duration are. The cainjector's job (webhook and APIService caBundle) is
not simulated: with webhook admission off and aggregated APIs unreachable here, nothing would read it.
Runs while the cert-manager CRDs are installed.
"""
from __future__ import annotations

import base64
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from . import serving
from .framework import Simulator, log

CM = "cert-manager.io/v1"
MANAGER = "cert-manager"
# Where ClusterIssuers find their secrets (cert-manager's --cluster-resource-namespace, by default its own).
CLUSTER_RESOURCE_NS = "cert-manager"


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _duration(text: str | None) -> datetime.timedelta:
    """Go durations as cert-manager writes them ("2160h", "8760h0m0s"); default 90 days."""
    if not text:
        return datetime.timedelta(days=90)
    total, number = 0.0, ""
    units = {"h": 3600, "m": 60, "s": 1}
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
    return datetime.timedelta(seconds=total or 90 * 86400)


def issue(spec: dict, ca_pem: tuple | None) -> tuple:
    """(cert PEM, key PEM, CA PEM, notBefore, notAfter) for a Certificate spec; ca_pem (cert, key) signs it,
    None: self-signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    cn = spec.get("commonName") or (spec.get("dnsNames") or ["certificate"])[0]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn[:64])])
    now = datetime.datetime.now(datetime.timezone.utc)
    after = now + _duration(spec.get("duration"))
    if ca_pem:
        ca_cert = x509.load_pem_x509_certificate(ca_pem[0])
        ca_key = serialization.load_pem_private_key(ca_pem[1], None)
        issuer_name = ca_cert.subject
    else:
        ca_cert, ca_key, issuer_name = None, key, subject
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(after)
               .add_extension(x509.BasicConstraints(ca=bool(spec.get("isCA")), path_length=None), critical=True))
    names = [x509.DNSName(n) for n in spec.get("dnsNames") or []]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    ca_out = ca_pem[0] if ca_pem else cert_pem
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return cert_pem, _pem_key(key), ca_out, now.strftime(stamp), after.strftime(stamp)


class CertManagerSimulator(Simulator):
    name = "cert-manager"
    watches = {"Certificate": CM, "Issuer": CM, "ClusterIssuer": CM}
    extra_kinds = {"Secret": "v1"}

    def reconcile(self, kind, key, obj):
        if obj is None:
            return
        if kind == "Certificate":
            return self._certificate(obj.to_dict())
        issuer = obj.to_dict()
        ready, reason, message = self._issuer_ready(issuer, key[1] or CLUSTER_RESOURCE_NS)
        self._status(kind, issuer, [serving.condition("Ready", ready, reason, message)])
        # Certificates waiting for this issuer
        for cert in self.api("Certificate").get(namespace=key[1]).items:
            ref = cert.spec.issuerRef or {}
            if ref.get("name") == key[2]:
                self.requeue("Certificate", cert.metadata.namespace, cert.metadata.name)

    def _issuer_ready(self, issuer: dict, namespace: str | None) -> tuple:
        spec = issuer.get("spec") or {}
        if "selfSigned" in spec:
            return True, "IsReady", ""
        if "ca" in spec:
            secret = self.get("Secret", namespace, spec["ca"].get("secretName", ""))
            if secret is None:
                secret = spec["ca"].get("secretName")
                return False, "ErrGetKeyPair", f"Error getting keypair for CA issuer: secret \"{secret}\" not found"
            return True, "KeyPairVerified", "Signing CA verified"
        return False, "ErrInitIssuer", "issuer type not simulated (only selfSigned and ca)"

    def _status(self, kind: str, obj: dict, conditions: list, extra: dict | None = None) -> None:
        old = obj.get("status") or {}
        status = dict(extra or {}, conditions=serving.keep_times(old.get("conditions"), conditions))
        if serving.same_conditions(old.get("conditions"), conditions) and all(
                old.get(k) == v for k, v in (extra or {}).items()):
            return
        meta = obj["metadata"]
        body = {"apiVersion": CM, "kind": kind, "metadata": {"name": meta["name"]}, "status": status}
        if meta.get("namespace"):
            body["metadata"]["namespace"] = meta["namespace"]
        self.api(kind).status.patch(body=body, namespace=meta.get("namespace"),
                                    content_type="application/merge-patch+json")

    def _certificate(self, cert: dict) -> None:
        meta, spec = cert["metadata"], cert.get("spec") or {}
        ns = meta["namespace"]
        ref = spec.get("issuerRef") or {}
        kind = ref.get("kind") or "Issuer"
        issuer = self.get(kind if kind in ("Issuer", "ClusterIssuer") else "Issuer",
                          ns if kind != "ClusterIssuer" else None, ref.get("name", ""))
        pending = serving.condition("Ready", False, "Pending", "Issuing certificate as Secret does not exist")
        if issuer is None:
            return self._status("Certificate", cert, [pending])
        issuer = issuer.to_dict()
        secrets_ns = ns if kind != "ClusterIssuer" else CLUSTER_RESOURCE_NS
        ready, dummy, dummy2 = self._issuer_ready(issuer, secrets_ns)
        if not ready:
            return self._status("Certificate", cert, [pending])
        secret_name = spec["secretName"]
        existing = self.get("Secret", ns, secret_name)
        if existing is not None and (existing.metadata.annotations or {}).get(
                "cert-manager.io/certificate-name") == meta["name"]:
            return self._status("Certificate", cert, [serving.condition(
                "Ready", True, "Ready", "Certificate is up to date and has not expired")])
        ca_pem = None
        ispec = issuer.get("spec") or {}
        if "ca" in ispec:
            ca_secret = self.get("Secret", secrets_ns, ispec["ca"]["secretName"]).to_dict()
            data = ca_secret.get("data") or {}
            ca_pem = (base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"]))
        crt, key, ca, before, after = issue(spec, ca_pem)
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                  "metadata": {"name": secret_name, "namespace": ns,
                               "annotations": {"cert-manager.io/certificate-name": meta["name"],
                                               "cert-manager.io/issuer-name": ref.get("name", ""),
                                               "cert-manager.io/issuer-kind": kind,
                                               "cert-manager.io/issuer-group": "cert-manager.io"}},
                  "data": {k: base64.b64encode(v).decode() for k, v in
                           (("tls.crt", crt), ("tls.key", key), ("ca.crt", ca))}}
        self.api("Secret").server_side_apply(body=secret, namespace=ns, field_manager=MANAGER, force_conflicts=True)
        log.info("cert-manager: %s/%s issued into Secret %s", ns, meta["name"], secret_name)
        self._status("Certificate", cert, [serving.condition(
            "Ready", True, "Ready", "Certificate is up to date and has not expired")],
            {"notBefore": before, "notAfter": after, "renewalTime": after, "revision": 1})
