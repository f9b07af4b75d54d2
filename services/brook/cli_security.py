"""`brook broker`'s security settings, as Kafka names them: listeners, TLS, SASL (OAUTHBEARER's token
validation among them), the authorizer, quotas, connection limits, and etcd's TLS and user; the values
come typed and within their ranges (brook.settings.options) and are checked here against each other."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from brook.cli_exit import fail
from brook.metadata import EtcdAuth
from brook.security.authorizer import AUTHORIZERS, AuthorizerSettings, parse_super_users
from brook.security.connection_limits import ConnectionLimitSettings, parse_overrides
from brook.security.listeners import Listener, ListenerError, parse_listeners
from brook.security.oauthbearer import OAuthSettings
from brook.security.quotas import QuotaSettings
from brook.security.sasl import SaslSettings
from brook.security.sasl_client import ClientCredentials
from brook.security.tls import TlsProtocolsError, TlsSettings, enabled_protocols
from brook.settings.broker import BrokerSettings


def listeners(a: SimpleNamespace) -> list[Listener]:
    """--listeners (Kafka's NAME://host:port,...); empty: the single PLAINTEXT listener of --host/--port."""
    if not (a.listeners or "").strip():
        return []
    advertised = a.advertised_listeners or ""
    if a.advertised_listeners_file:
        if advertised:
            fail("--advertised-listeners and --advertised-listeners-file are exclusive")
        try:
            advertised = Path(a.advertised_listeners_file).read_text().strip()
        except OSError as e:
            fail(f"--advertised-listeners-file: {e}")
    try:
        listeners = parse_listeners(a.listeners, advertised, a.listener_security_protocol_map)
    except ListenerError as e:
        fail(str(e))
    names = {li.name for li in listeners}
    if a.inter_broker_listener_name and a.inter_broker_listener_name.upper() not in names:
        fail(f"--inter-broker-listener-name {a.inter_broker_listener_name} is not in --listeners")
    return listeners


def security(a: SimpleNamespace, s: BrokerSettings) -> BrokerSettings:
    s.listeners = listeners(a)
    s.inter_broker_listener_name = (a.inter_broker_listener_name or "").upper() or None
    try:
        protocols = enabled_protocols(a.ssl_enabled_protocols)
    except TlsProtocolsError as e:
        fail(f"--ssl-enabled-protocols (ssl.enabled.protocols) {e}")
    s.tls = TlsSettings(
        protocols=protocols,
        keystore_location=a.ssl_keystore_location,
        key_location=a.ssl_key_location,
        key_password=os.environ.get("BROOK_SSL_KEY_PASSWORD"),  # a secret: never a flag
        truststore_location=a.ssl_truststore_location,
        client_auth=a.ssl_client_auth,
        client_auth_required_listeners=tuple(
            n.strip().upper() for n in (a.ssl_client_auth_listeners or "").split(",") if n.strip()
        ),
    )
    mechanisms = tuple(m.strip().upper() for m in (a.sasl_enabled_mechanisms or "").split(",") if m.strip())
    s.sasl = SaslSettings(
        enabled_mechanisms=mechanisms,
        connections_max_reauth_ms=a.connections_max_reauth_ms,
        failed_authentication_delay_ms=a.connection_failed_authentication_delay_ms,
        oauth=OAuthSettings(
            jwks_endpoint_url=a.sasl_oauthbearer_jwks_endpoint_url,
            jwks_refresh_ms=a.sasl_oauthbearer_jwks_endpoint_refresh_ms,
            expected_audience=tuple(
                x.strip() for x in a.sasl_oauthbearer_expected_audience.split(",") if x.strip()
            ),
            expected_issuer=a.sasl_oauthbearer_expected_issuer,
            sub_claim_name=a.sasl_oauthbearer_sub_claim_name,
            clock_skew_s=a.sasl_oauthbearer_clock_skew_seconds,
            unsecured=a.sasl_oauthbearer_unsecured == "true",
        ),
    )
    if "OAUTHBEARER" in mechanisms and not (s.sasl.oauth.jwks_endpoint_url or s.sasl.oauth.unsecured):
        fail(
            "OAUTHBEARER needs --sasl-oauthbearer-jwks-endpoint-url (the identity provider's keys), "
            "or --sasl-oauthbearer-unsecured true to accept unsigned tokens (development only)"
        )
    unknown = set(s.tls.client_auth_required_listeners) - {li.name for li in s.listeners}
    if unknown:
        fail(f"--ssl-client-auth-listeners: {', '.join(sorted(unknown))} not in --listeners")
    if any(li.tls for li in s.listeners) and not a.ssl_keystore_location:
        fail("an SSL or SASL_SSL listener needs --ssl-keystore-location")
    if a.inter_broker_sasl_username:
        password = os.environ.get("BROOK_INTER_BROKER_SASL_PASSWORD")
        if a.inter_broker_sasl_password_file:
            password = Path(a.inter_broker_sasl_password_file).read_text().strip()
        if not password:
            fail("--inter-broker-sasl-username needs BROOK_INTER_BROKER_SASL_PASSWORD or a password file")
        mechanism = a.sasl_mechanism_inter_broker_protocol.upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            fail(
                f"--sasl-mechanism-inter-broker-protocol {mechanism}: brokers log in to each other with "
                "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
            )
        if mechanism not in mechanisms:
            fail(f"--sasl-mechanism-inter-broker-protocol {mechanism} is not in --sasl-enabled-mechanisms")
        s.inter_broker_credentials = ClientCredentials(mechanism, a.inter_broker_sasl_username, password)
    elif s.listeners and s.inter_broker_listener().sasl and s.etcd_endpoints:
        fail("the inter-broker listener uses SASL: give --inter-broker-sasl-username")
    authorizer = (a.authorizer_class_name or "").strip()
    if authorizer and authorizer not in AUTHORIZERS:
        fail(f"--authorizer-class-name {authorizer}: use {' or '.join(AUTHORIZERS)}, or leave it empty")
    try:
        supers = parse_super_users(a.super_users or "")
    except ValueError as e:
        fail(f"--super-users: {e}")
    s.authorizer = AuthorizerSettings(authorizer, supers, a.allow_everyone_if_no_acl_found == "true")
    s.quotas = QuotaSettings(a.quota_window_num, a.quota_window_size_seconds)
    try:
        overrides = parse_overrides(a.max_connections_per_ip_overrides or "")
    except ValueError as e:
        fail(f"--max-connections-per-ip-overrides: {e}")
    s.connection_limits = ConnectionLimitSettings(
        a.max_connections, a.max_connections_per_ip, overrides, a.max_connection_creation_rate
    )
    s.max_broker_partitions = a.max_broker_partitions
    return s


def etcd_auth(a: SimpleNamespace) -> EtcdAuth:
    """etcdctl's --cacert/--cert/--key/--user; the password from BROOK_ETCD_PASSWORD or a file."""
    files: dict[str, Path | None] = {}
    for flag, value in (("cacert", a.etcd_cacert), ("cert", a.etcd_cert), ("key", a.etcd_key)):
        files[flag] = Path(value) if value else None
        if value and not os.access(value, os.R_OK):
            fail(f"--etcd-{flag} {value}: no such readable file")
    if (files["cert"] is None) != (files["key"] is None):
        fail("--etcd-cert and --etcd-key go together (a client certificate and its key)")
    password = os.environ.get("BROOK_ETCD_PASSWORD")
    if a.etcd_password_file:
        try:
            password = Path(a.etcd_password_file).read_text().strip()
        except OSError as e:
            fail(f"--etcd-password-file {a.etcd_password_file}: {e.strerror}")
    user = a.etcd_user or None
    if user is not None and not password:
        fail("--etcd-user needs BROOK_ETCD_PASSWORD or --etcd-password-file")
    if user is None and password:
        fail("an etcd password is given without --etcd-user")
    return EtcdAuth(files["cacert"], files["cert"], files["key"], user, password if user else None)
