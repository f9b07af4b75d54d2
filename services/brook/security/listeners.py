"""Kafka's listener configuration: `listeners`, `advertised.listeners`, `listener.security.protocol.map`.

A listener is a name, a bind address and a security protocol; `NAME://host:port`, with the protocol
taken from the map (by default each of Kafka's protocol names maps to itself).
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}


class ListenerError(ValueError):
    """A listener setting Kafka would refuse at start-up."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str
    advertised_host: str
    advertised_port: int

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...`; empty: Kafka's default (each protocol name is also a listener name)."""
    if not text.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    result: dict[str, str] = {}
    for item in text.split(","):
        name, sep, protocol = item.strip().partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: bad entry '{item.strip()}'")
        result[name.strip().upper()] = protocol
    return result


def _endpoints(text: str, what: str) -> dict[str, tuple[str, int]]:
    result: dict[str, tuple[str, int]] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ListenerError(f"{what}: '{item}' is not NAME://host:port")
        key = name.upper()
        if key in result:
            raise ListenerError(f"{what}: listener {key} is given twice")
        result[key] = (host.strip("[]"), int(port))
    return result


def parse_listeners(listeners: str, advertised: str, protocol_map: str) -> list[Listener]:
    """The listeners in the order given; each advertised as in `advertised`, else at its bind address."""
    protocols = parse_protocol_map(protocol_map)
    bound = _endpoints(listeners, "listeners")
    if not bound:
        raise ListenerError("listeners: no listener given")
    adv = _endpoints(advertised, "advertised.listeners")
    for name in adv:
        if name not in bound:
            raise ListenerError(f"advertised.listeners: {name} is not in listeners")
    result = []
    for name, (host, port) in bound.items():
        if name not in protocols:
            raise ListenerError(f"listener {name} has no entry in listener.security.protocol.map")
        a_host, a_port = adv.get(name, (host, port))
        result.append(Listener(name, host, port, protocols[name], a_host or host, a_port or port))
    return result
