"""Compaction is crash-safe: a crash after any on-disk step of a swap, then reopen, loses and duplicates
nothing, and the next pass finishes the job."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_batches import FakeClock
from test_log_cleaner import NOW, Row, active_base, compact_log, expected_after_compaction, fill, rows

from brook.config import TopicConfig
from brook.log import PartitionLog, cleaner
from brook.log.cleaner import CleanStats

COMPACT = frozenset({"compact"})


class _Crash(Exception):
    pass


def _build(path: Path, scenario: str) -> tuple[PartitionLog, list[Row], int]:
    """(log, rows written, first uncleanable offset).

    grouped: two-batch segments, cleaned in groups of three (segment.bytes raised before compacting).
    emptied: two-batch segments over two keys, so every cleaned segment but the last comes out empty.
    """
    log = compact_log(path, FakeClock(NOW), segment_bytes=150 if scenario == "emptied" else 200)
    written = fill(log, 40, keys=2 if scenario == "emptied" else 3)
    if scenario == "grouped":
        log.update_config(TopicConfig(cleanup_policy=COMPACT, segment_bytes=450))
    return log, written, active_base(log)


def _reopen(path: Path, scenario: str) -> PartitionLog:
    return compact_log(path, FakeClock(NOW), segment_bytes=450 if scenario == "grouped" else 150)


def _leftovers(path: Path) -> list[str]:
    return [p.name for p in path.iterdir() if p.name.endswith((".cleaned", ".swap", ".tmp"))]


@pytest.mark.parametrize("scenario", ["grouped", "emptied"])
@pytest.mark.parametrize(
    ("step", "nth"),
    [("cleaned", 1), ("swapped", 1), ("deleted", 1), ("deleted", 2), ("renamed", 1), ("cleaned", 2),
     ("swapped", 3), ("renamed", 4)],
)  # fmt: skip
def test_crash_during_compaction_then_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, step: str, nth: int
) -> None:
    reference, written, uncleanable = _build(tmp_path / "ref", scenario)
    reference.compact()
    expected = expected_after_compaction(written, uncleanable)
    assert rows(reference) == expected

    log, _, _ = _build(tmp_path / "p", scenario)
    end = log.log_end_offset
    seen = 0

    def crash_at(name: str) -> None:
        nonlocal seen
        if name == step:
            seen += 1
            if seen == nth:
                raise _Crash(name)

    monkeypatch.setattr(cleaner, "_step", crash_at)
    with pytest.raises(_Crash):
        log.compact()
    monkeypatch.undo()
    del log  # no close(): a crash

    log = _reopen(tmp_path / "p", scenario)
    assert _leftovers(tmp_path / "p") == []
    got = rows(log)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))  # no duplicates
    assert set(expected) <= set(got) <= set(written)  # nothing lost, nothing invented
    assert (log.log_start_offset, log.log_end_offset) == (0, end)
    # The next pass completes the compaction.
    log.compact()
    assert rows(log) == expected
    log.close()
    log = _reopen(tmp_path / "p", scenario)
    assert rows(log) == expected
    assert log.compact() == CleanStats()


def test_leftovers_of_a_pass_are_discarded(tmp_path: Path) -> None:
    log, written, _ = _build(tmp_path / "p", "grouped")
    log.close()
    d = tmp_path / "p"
    (d / "00000000000000000000.log.cleaned").write_bytes(b"half a batch")
    (d / "00000000000000000000.index.swap").write_bytes(b"junk")  # not ours: no such file is written
    (d / "garbage.swap").write_bytes(b"junk")
    log = _reopen(d, "grouped")
    assert _leftovers(d) == []
    assert rows(log) == written


def test_an_empty_swap_replaces_only_its_own_segment(tmp_path: Path) -> None:
    """A crash right after the swap file of an emptied segment was committed, hand-made."""
    log, written, _ = _build(tmp_path / "p", "emptied")
    second = log._segments[1].base_offset
    log.close()
    d = tmp_path / "p"
    (d / "00000000000000000000.log.swap").write_bytes(b"")
    log = _reopen(d, "emptied")
    assert (d / "00000000000000000000.log").stat().st_size == 0
    assert rows(log) == [r for r in written if r[0] >= second]
    assert log.log_start_offset == 0
