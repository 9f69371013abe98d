"""Turn cumulative counters into per-second rates.

A counter needs two readings before it gives a rate. A reading smaller than the one before
it is a reset (driver reload, counter clear, or a wrap we cannot size): that interval is
dropped rather than reported as a huge spike, and the new reading becomes the baseline.
"""

from __future__ import annotations

from collections.abc import Hashable


class CounterRates:
    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[float, float]] = {}
        self._reset: set[Hashable] = set()

    def update(self, key: Hashable, ts: float, value: float | None) -> float | None:
        """Record ``value`` at ``ts``; return units per second since the last reading."""
        if value is None:
            # Unreadable this tick: keep the old baseline; the next rate spans the gap,
            # which is still a true average over that longer interval.
            return None
        self._reset.discard(key)
        previous = self._last.get(key)
        self._last[key] = (ts, value)
        if previous is None:
            return None
        last_ts, last_value = previous
        elapsed = ts - last_ts
        if value < last_value:
            self._reset.add(key)
            return None
        if elapsed <= 0:
            return None
        return (value - last_value) / elapsed

    def was_reset(self, key: Hashable) -> bool:
        """True when the latest ``update`` of ``key`` found the counter gone backwards."""
        return key in self._reset

    def forget(self, key: Hashable) -> None:
        self._last.pop(key, None)
        self._reset.discard(key)
