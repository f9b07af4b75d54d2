"""Topic regexes of the consumer group protocol as Kafka resolves them: RE2 syntax (Kafka compiles them
with RE2/J), so what Kafka refuses (lookarounds, backreferences) is refused here too, and a topic
matches when the whole of its name does (RE2/J's matches())."""

from __future__ import annotations

from typing import Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad regex is answered on the wire, not logged by RE2


class TopicRegex(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


class InvalidRegex(ValueError):
    pass


def compile_regex(text: str) -> TopicRegex:
    try:
        pattern: TopicRegex = re2.compile(text, _OPTIONS)
    except re2.error as e:
        detail = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidRegex(detail) from None
    return pattern
