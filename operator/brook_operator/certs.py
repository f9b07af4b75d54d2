"""Certificates the operator issues and when to renew them: a cluster CA (signs broker certificates),
a clients CA (signs User certificates), broker and client certificates.

Pure: keys, names and the time in; PEM out (no Kubernetes, no files). The handlers keep the results in
Secrets. EC P-256 keys: every Kafka client (librdkafka, Java, Python's ssl) accepts them and they cost
little to make.

Renewal keeps trust continuous: a CA is renewed with its own key (same subject, same key: certificates
it signed stay valid and clients that trust the old CA certificate verify new leaves), and a leaf is
re-issued from the same CA key well before it expires, so nobody has to restart anything at the same
moment.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_CA_VALIDITY_DAYS = 5 * 365
DEFAULT_CERT_VALIDITY_DAYS = 365
DEFAULT_RENEW_BEFORE_DAYS = 30
_BACKDATE = dt.timedelta(minutes=5)  # clocks of the readers may lag the operator's


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    return key


def load_cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def new_ca(common_name: str, now: dt.datetime, validity_days: int = DEFAULT_CA_VALIDITY_DAYS) -> KeyPair:
    """A new self-signed CA with a new key."""
    key = ec.generate_private_key(ec.SECP256R1())
    return KeyPair(_ca_cert(key, _name(common_name), now, validity_days), _key_pem(key))


def renew_ca(ca: KeyPair, now: dt.datetime, validity_days: int = DEFAULT_CA_VALIDITY_DAYS) -> KeyPair:
    """The same CA (subject and key) with a new validity period."""
    key = _load_key(ca.key_pem)
    return KeyPair(_ca_cert(key, load_cert(ca.cert_pem).subject, now, validity_days), ca.key_pem)


def _ca_cert(key: ec.EllipticCurvePrivateKey, subject: x509.Name, now: dt.datetime, days: int) -> bytes:
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def issue(
    ca: KeyPair,
    common_name: str,
    now: dt.datetime,
    *,
    hosts: Iterable[str] = (),
    server: bool = True,
    client: bool = True,
    organization: str | None = None,
    validity_days: int = DEFAULT_CERT_VALIDITY_DAYS,
) -> KeyPair:
    """A leaf certificate with a new key, signed by `ca`. `hosts`: DNS names or IP addresses (SANs)."""
    ca_key = _load_key(ca.key_pem)
    ca_cert = load_cert(ca.cert_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        # Never past the CA's own expiry: a chain is only as valid as its shortest link.
        .not_valid_after(min(now + dt.timedelta(days=validity_days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans = _sans(hosts)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _sans(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):  # ordered, unique
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def not_after(cert_pem: bytes) -> dt.datetime:
    return load_cert(cert_pem).not_valid_after_utc


def hosts_of(cert_pem: bytes) -> set[str]:
    """The DNS names and IP addresses a certificate is valid for."""
    try:
        ext = load_cert(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {*ext.value.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in ext.value.get_values_for_type(x509.IPAddress)
    }


def signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    """Whether `cert_pem` was issued by the CA of `ca_pem` (its key signed it)."""
    cert, ca = load_cert(cert_pem), load_cert(ca_pem)
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, Exception):  # cryptography raises InvalidSignature among others
        return False
    return True


def needs_renewal(cert_pem: bytes, now: dt.datetime, renew_before_days: int) -> bool:
    """Inside the renewal window (or expired)."""
    return not_after(cert_pem) - dt.timedelta(days=renew_before_days) <= now


def leaf_is_current(
    leaf: KeyPair | None,
    ca: KeyPair,
    now: dt.datetime,
    *,
    hosts: Iterable[str] = (),
    renew_before_days: int = DEFAULT_RENEW_BEFORE_DAYS,
) -> bool:
    """A leaf can stay: it exists, parses, was signed by `ca`, covers `hosts` and is outside the
    renewal window. Anything else is re-issued."""
    if leaf is None:
        return False
    try:
        return (
            signed_by(leaf.cert_pem, ca.cert_pem)
            and set(hosts) <= hosts_of(leaf.cert_pem)
            and not needs_renewal(leaf.cert_pem, now, renew_before_days)
        )
    except ValueError:
        return False


def principal_of(common_name: str) -> str:
    """The Kafka principal a broker derives from a certificate issued by `issue` with no organization
    (Kafka's default principal builder: the subject's distinguished name)."""
    return f"User:CN={common_name}"
