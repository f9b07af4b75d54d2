"""A throwaway PKI for one control plane: a CA, the API server's serving certificate, client
certificates (CN = user, O = groups, as the API server's x509 authenticator reads them) and the
service-account signing key. Everything is made per test run and lives in its work directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


class Pki:
    """Files under `root`: ca.crt/ca.key, apiserver.crt/.key, sa.key/sa.pub, and client pairs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        self._not_before = now - datetime.timedelta(minutes=5)
        self._not_after = now + _DAY
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = _name("brook-e2e-ca")
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )  # fmt: skip
        self.ca = CertFiles(root / "ca.crt", root / "ca.key")
        self.ca.cert.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self.ca.key, self._ca_key)
        # The service-account token signer: RSA, as the controller-manager's token controller expects.
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key, self.sa_pub = root / "sa.key", root / "sa.pub"
        _write_key(self.sa_key, sa_key)
        self.sa_pub.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.apiserver = self._issue(
            "apiserver",
            _name("kube-apiserver"),
            ExtendedKeyUsageOID.SERVER_AUTH,
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes"),
                    x509.DNSName("kubernetes.default"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
        )

    def client(self, file_stem: str, user: str, *groups: str) -> CertFiles:
        """A client certificate the API server maps to `user` in `groups`."""
        return self._issue(file_stem, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)

    def _issue(
        self,
        stem: str,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        san: x509.SubjectAlternativeName | None = None,
    ) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        out = CertFiles(self.root / f"{stem}.crt", self.root / f"{stem}.key")
        out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(out.key, key)
        return out
