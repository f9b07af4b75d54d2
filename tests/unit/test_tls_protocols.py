"""ssl.enabled.protocols' values: the versions served, in order; the versions Java 17 turns off
dropped; a name no TLS has, or a list with nothing left, refused."""

from __future__ import annotations

import pytest

from brook.security.tls import TlsProtocolsError, enabled_protocols


def test_the_versions_served_in_order() -> None:
    assert enabled_protocols("TLSv1.2,TLSv1.3") == ("TLSv1.2", "TLSv1.3")
    assert enabled_protocols(" TLSv1.3 , TLSv1.2 ") == ("TLSv1.2", "TLSv1.3")
    assert enabled_protocols("TLSv1.3") == ("TLSv1.3",)
    # trivup's list for Kafka (librdkafka's test harness): Java 17 serves TLSv1.2 of it.
    assert enabled_protocols("TLSv1.2,TLSv1.1,TLSv1") == ("TLSv1.2",)


@pytest.mark.parametrize("value", ["SSLv3", "TLSv1.2,tls1.3", "TLSv1,TLSv1.1", ""])
def test_refused(value: str) -> None:
    with pytest.raises(TlsProtocolsError):
        enabled_protocols(value)
