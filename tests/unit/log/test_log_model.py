"""Random operation sequences checked against a simple model of the log (a list of batches)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from log_batches import FakeClock, make_batch, open_log, with_base_offset

from brook.log import PartitionLog


def _check(log: PartitionLog, model: list[tuple[int, int, bytes]], rng: random.Random) -> None:
    end = model[-1][1] + 1 if model else log.log_start_offset
    assert log.log_end_offset == end
    assert log.size_bytes == sum(len(b) for _, _, b in model)
    assert [(h.base_offset, h.last_offset) for h in log.iter_batch_headers()] == [(b, e) for b, e, _ in model]
    for _ in range(5):
        if not model:
            break
        base, last, data = rng.choice(model)
        offset = rng.randint(base, last)
        s = log.read(offset, rng.choice([1, 500, 1 << 20]))
        assert s is not None
        got = s.read()
        assert got[: len(data)] == data
        assert len(got) >= len(data)


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_match_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = {
        "segment_bytes": rng.choice([300, 1000, 5000]),
        "index_interval_bytes": rng.choice([0, 100, 4096]),
    }
    clock = FakeClock()
    log = open_log(tmp_path / "p", clock, **config)
    model: list[tuple[int, int, bytes]] = []
    for _ in range(60):
        op = rng.random()
        if op < 0.6:
            batches = [
                make_batch(rng.randint(1, 4), value_size=rng.randint(0, 80), timestamp=clock.now)
                for _ in range(rng.randint(1, 3))
            ]
            r = log.append(b"".join(batches))
            offset = r.base_offset
            for b in batches:
                n = int.from_bytes(b[23:27], "big") + 1
                model.append((offset, offset + n - 1, with_base_offset(b, offset)))
                offset += n
            clock.now += rng.randint(0, 100)
        elif op < 0.75 and model:
            target = rng.randint(model[0][0], model[-1][1] + 1)
            log.truncate_to(target)
            model = [m for m in model if m[1] < target]
        elif op < 0.85:
            log.close()
            log = open_log(tmp_path / "p", clock, **config)
        else:
            # A crash, maybe with a torn write at the tail of the newest segment.
            del log
            if rng.random() < 0.5:
                newest = max(p for p in (tmp_path / "p").iterdir() if p.suffix == ".log")
                with open(newest, "ab") as f:
                    f.write(make_batch(2)[: rng.randint(1, 80)])
            log = open_log(tmp_path / "p", clock, **config)
        _check(log, model, rng)
    log.close()
