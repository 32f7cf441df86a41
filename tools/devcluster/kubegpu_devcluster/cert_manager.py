"""What the real cert-manager (control_plane.py, build/cert-manager) leaves behind for a Certificate, read back by
tests: the Certificate Ready, the CertificateRequest its controllers made, approved and signed, the Secret with a
key and a certificate for the Certificate's DNS names that its CA signed, and that CA in the caBundle of every
webhook configuration, APIService and CRD annotated `cert-manager.io/inject-ca-from: <namespace>/<certificate>`.

`secret_problems` and `bundles` are pure (plain dicts in, findings out); `issued` waits on a live cluster.
"""
from __future__ import annotations

import base64

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from .testing import WAIT_TIMEOUT, wait_for

CM = "cert-manager.io/v1"
INJECT_ANNOTATION = "cert-manager.io/inject-ca-from"
# The kinds the CA injector writes into, with where each keeps its caBundle (cainjector's injectable targets).
INJECTABLE = (("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
              ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
              ("apiregistration.k8s.io/v1", "APIService"),
              ("apiextensions.k8s.io/v1", "CustomResourceDefinition"))


def condition(obj: dict | None, kind: str) -> str | None:
    """The status of condition `kind` ("True", "False", "Unknown"), None when absent."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status")
    return None


def _pem(secret: dict, key: str) -> bytes:
    return base64.b64decode((secret.get("data") or {}).get(key) or "")


def secret_problems(secret: dict, certificate: dict) -> list:
    """Why `secret` is not what cert-manager issues for `certificate` (empty when it is): a kubernetes.io/tls Secret
    naming the Certificate, whose tls.crt carries exactly the Certificate's DNS names, matches tls.key and is signed
    by ca.crt."""
    name = certificate["metadata"]["name"]
    problems = []
    if secret.get("type") != "kubernetes.io/tls":
        problems.append(f"type {secret.get('type')!r}, not kubernetes.io/tls")
    if ((secret.get("metadata") or {}).get("annotations") or {}).get("cert-manager.io/certificate-name") != name:
        problems.append(f"annotation cert-manager.io/certificate-name is not {name!r}")
    try:
        cert = x509.load_pem_x509_certificate(_pem(secret, "tls.crt"))
        ca = x509.load_pem_x509_certificate(_pem(secret, "ca.crt"))
        key = serialization.load_pem_private_key(_pem(secret, "tls.key"), None)
    except ValueError as e:
        return problems + [f"tls.crt, ca.crt or tls.key unreadable: {e}"]
    try:
        dns = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    wanted = (certificate.get("spec") or {}).get("dnsNames") or []
    if sorted(dns) != sorted(wanted):
        problems.append(f"tls.crt names {sorted(dns)}, the Certificate asks for {sorted(wanted)}")
    if key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != \
            cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        problems.append("tls.key is not the key of tls.crt")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as e:
        problems.append(f"tls.crt is not signed by ca.crt ({type(e).__name__}: {e})")
    return problems


def bundles(obj: dict) -> list:
    """The caBundle (base64, as stored; '' where unset) of each place of `obj` the CA injector writes into."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        return [(w.get("clientConfig") or {}).get("caBundle") or "" for w in obj.get("webhooks") or []]
    if kind == "APIService":
        return [spec.get("caBundle") or ""]
    if kind == "CustomResourceDefinition":
        return [((((spec.get("conversion") or {}).get("webhook") or {}).get("clientConfig") or {})
                 .get("caBundle") or "")]
    return []


def injection_targets(admin, namespace: str, name: str) -> list:
    """Every injectable object annotated to take its CA from Certificate namespace/name, as plain dicts."""
    found = []
    for api_version, kind in INJECTABLE:
        for item in admin.resources.get(api_version=api_version, kind=kind).get().items:
            obj = item.to_dict()
            if ((obj["metadata"].get("annotations") or {}).get(INJECT_ANNOTATION)) == f"{namespace}/{name}":
                found.append(dict(obj, apiVersion=api_version, kind=kind))
    return found


def issued(admin, namespace: str, name: str, timeout: float = WAIT_TIMEOUT) -> dict:
    """Wait until cert-manager has issued Certificate namespace/name and injected its CA wherever that is asked
    for (at least one object must ask); fail saying what is missing. Returns {"certificate", "request", "secret",
    "targets"}: the objects as plain dicts, targets the "Kind/name" of each object injected."""
    def get(api_version, kind, obj_name):
        found = admin.resources.get(api_version=api_version, kind=kind).get(
            namespace=namespace, field_selector=f"metadata.name={obj_name}").items
        return found[0].to_dict() if found else None

    def ready_certificate():
        found = get(CM, "Certificate", name)
        return found if condition(found, "Ready") == "True" else None

    cert = wait_for(ready_certificate, timeout=timeout, what=f"Certificate {namespace}/{name} Ready")
    requests = [r.to_dict() for r in admin.resources.get(api_version=CM, kind="CertificateRequest").get(
        namespace=namespace).items]
    mine = [r for r in requests if (r["metadata"].get("annotations") or {}).get(
        "cert-manager.io/certificate-name") == name]
    assert mine, f"no CertificateRequest for Certificate {namespace}/{name}: it was not issued by cert-manager"
    request = mine[-1]
    assert condition(request, "Approved") == "True" and condition(request, "Ready") == "True", request.get("status")
    secret = get("v1", "Secret", cert["spec"]["secretName"])
    assert secret is not None, f"Certificate {namespace}/{name} is Ready, Secret {cert['spec']['secretName']} missing"
    problems = secret_problems(secret, cert)
    assert not problems, f"Secret {namespace}/{cert['spec']['secretName']}: {'; '.join(problems)}"
    ca = secret["data"]["ca.crt"]

    def injected():
        targets = injection_targets(admin, namespace, name)
        return targets if targets and all(set(bundles(t)) == {ca} for t in targets) else None

    targets = wait_for(injected, timeout=timeout, what=f"the CA of {namespace}/{name} in the caBundle of every "
                       f"object annotated {INJECT_ANNOTATION}: {namespace}/{name}")
    return {"certificate": cert, "request": request, "secret": secret,
            "targets": sorted(f"{t['kind']}/{t['metadata']['name']}" for t in targets)}
