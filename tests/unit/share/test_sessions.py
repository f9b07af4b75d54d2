"""Share sessions and the connections they came on (brook.share.coordinator): a closed connection ends
the sessions whose last request came on it, and only those; a session that moved to another
connection, or was opened anew, outlives the old one."""

from __future__ import annotations

from collections.abc import Callable

from brook.share.coordinator import ShareCoordinator
from brook.share.partition import ShareSettings
from brook.share.state_records import ShareKey, ShareSnapshot


class MemoryStore:
    """The ShareStateStore protocol over a dict."""

    def __init__(self) -> None:
        self.states: dict[ShareKey, ShareSnapshot] = {}

    async def load(self, key: ShareKey) -> ShareSnapshot | None:
        return self.states.get(key)

    async def save(self, key: ShareKey, snapshot: Callable[[], ShareSnapshot | None]) -> None:
        state = snapshot()
        if state is not None:
            self.states[key] = state


def coordinator() -> ShareCoordinator:
    return ShareCoordinator(MemoryStore(), lambda g: ShareSettings(), lambda: {}, lambda g: (45_000, 5_000))


def test_a_closed_connection_ends_only_its_own_sessions() -> None:
    c, one, two = coordinator(), object(), object()
    c.session("g", "a", 0, one)
    c.session("g", "b", 0, two)
    c.connection_closed(one)
    assert set(c.sessions) == {("g", "b")}
    c.connection_closed(two)
    assert c.sessions == {}


def test_a_session_follows_the_connection_of_its_last_request() -> None:
    c, one, two = coordinator(), object(), object()
    c.session("g", "a", 0, one)
    c.session("g", "a", 1, two)  # the client reconnected and went on with the same session
    c.connection_closed(one)
    assert ("g", "a") in c.sessions
    c.connection_closed(two)
    assert ("g", "a") not in c.sessions


def test_a_session_opened_anew_outlives_the_old_connection() -> None:
    c, one, two = coordinator(), object(), object()
    c.session("g", "a", 0, one)
    c.session("g", "a", 0, two)  # epoch 0 replaces the session
    c.connection_closed(one)
    assert c.sessions[("g", "a")].connection is two
