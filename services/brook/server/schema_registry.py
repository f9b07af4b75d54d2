"""The broker's side of the schema registry it runs (`--schema-registry-port`): how the registry, a Kafka
client, reaches this broker; which listener checks basic-auth logins; the broker's authorizer handed in
for subject ACLs; the HTTPS certificate."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from brook.broker.broker import Broker
from brook.security.acls import Operation, ResourceType
from brook.security.listeners import Listener
from brook.settings.broker import BrokerSettings

from .listener import KafkaServer

if TYPE_CHECKING:  # imported when turned on: the `brook` CLI starts faster without its parsers
    from brook.registry import Authorize, SchemaRegistry

_WILDCARDS = ("", "0.0.0.0", "::")


def build(settings: BrokerSettings, server: KafkaServer, broker: Broker) -> SchemaRegistry:
    from brook.registry import SchemaRegistry, ScramBasicAuth

    bootstrap, client_config = _client(settings, server)
    auth = None
    if settings.schema_registry_basic_auth:
        auth = ScramBasicAuth(*_login_listener(settings, server))
    authorize: Authorize | None = None
    if broker.authorizer.enabled:  # subjects are governed by their topics' ACLs (registry/access.py)
        decide = broker.authorizer.authorize

        def authorize(principal: str, host: str, operation: str, resource_type: str, name: str) -> bool:
            return decide(principal, host, Operation[operation], ResourceType[resource_type], name)

    return SchemaRegistry(
        bootstrap,
        3 if settings.etcd_endpoints else 1,
        client_config=client_config,
        auth=auth,
        authorize=authorize,
    )


def tls_context(settings: BrokerSettings) -> ssl.SSLContext | None:
    if not settings.schema_registry_ssl_certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(settings.schema_registry_ssl_certfile, settings.schema_registry_ssl_keyfile)
    except (OSError, ssl.SSLError) as e:
        raise SystemExit(f"--schema-registry-ssl-certfile/keyfile: {e}") from None
    return context


def _address(listener: Listener, server: KafkaServer) -> str:
    """Where this broker's own clients reach a listener: a TLS listener by its advertised name (the one
    its certificate is for, as other brokers verify it), others on the loopback when bound to all."""
    if listener.tls and listener.advertised_host not in _WILDCARDS:
        return f"{listener.advertised_host}:{listener.advertised_port or server.ports[listener.name]}"
    host = listener.host if listener.host not in _WILDCARDS else "127.0.0.1"
    return f"{host}:{server.ports[listener.name]}"


def _tls_config(settings: BrokerSettings) -> dict[str, str]:
    """librdkafka's TLS settings from the broker's own: its truststore, and its certificate for
    listeners that require one (as another broker connects)."""
    tls = settings.tls
    config = {}
    if tls.truststore_location:
        config["ssl.ca.location"] = tls.truststore_location
    if tls.keystore_location:
        config["ssl.certificate.location"] = tls.keystore_location
        config["ssl.key.location"] = tls.key_location or tls.keystore_location
        if tls.key_password:
            config["ssl.key.password"] = tls.key_password
    return config


def _client(settings: BrokerSettings, server: KafkaServer) -> tuple[str, dict[str, str]]:
    """The registry's connection to its broker: the first PLAINTEXT listener, else the inter-broker
    listener with the identity this broker shows the others (its certificate, its SASL credentials)."""
    listeners = settings.effective_listeners()
    plain = next((li for li in listeners if li.protocol == "PLAINTEXT"), None)
    if plain is not None:
        return _address(plain, server), {}
    listener = settings.inter_broker_listener()
    config = {"security.protocol": listener.protocol}
    if listener.tls:
        config.update(_tls_config(settings))
    if listener.sasl:
        creds = settings.inter_broker_credentials
        if creds is None:
            raise SystemExit(
                f"--schema-registry-port: the registry connects through the inter-broker listener "
                f"{listener.name} (SASL): give the broker's credentials (--inter-broker-sasl-username)"
            )
        config.update(
            {
                "sasl.mechanism": creds.mechanism,
                "sasl.username": creds.username,
                "sasl.password": creds.password,
            }
        )
    return _address(listener, server), config


def _login_listener(settings: BrokerSettings, server: KafkaServer) -> tuple[str, str, str, dict[str, str]]:
    """The SASL listener basic-auth logins go to, SASL_PLAINTEXT before SASL_SSL: (address, protocol,
    mechanism, client config)."""
    sasl = [li for li in settings.effective_listeners() if li.sasl]
    sasl.sort(key=lambda li: li.tls)
    if not sasl or "SCRAM-SHA-512" not in settings.sasl.enabled_mechanisms:
        raise SystemExit(
            "--schema-registry-basic-auth needs a SASL_PLAINTEXT or SASL_SSL listener with SCRAM-SHA-512"
        )
    listener = sasl[0]
    config = _tls_config(settings) if listener.tls else {}
    return _address(listener, server), listener.protocol, "SCRAM-SHA-512", config
