"""Deterministic time signals for the simulator, with exact integrals.

Counters (bytes, energy, CPU time) must be the integral of the rate a gauge shows, or the
collector's rates would disagree with its gauges. Every signal here therefore offers both
``value(t)`` and a closed-form ``integral(a, b)``, so a node can be advanced by any step
(1 s or a day) in constant time and give the same counters either way.

Times inside a signal are relative to an origin (a job's start), which keeps floating
point exact enough for sub-second phases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_MASK = (1 << 64) - 1


def mix(*parts: int) -> int:
    """A 64-bit hash of integers (splitmix64 steps): stable across runs and platforms."""
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = (h ^ (part & _MASK)) & _MASK
        h = (h + 0x9E3779B97F4A7C15) & _MASK
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        h = z ^ (z >> 31)
    return h


def unit(*parts: int) -> float:
    """A deterministic number in [0, 1) from integers."""
    return mix(*parts) / 2.0**64


def noise(seed: int, key: int, t: float, step: float = 1.0) -> float:
    """Deterministic noise in [-1, 1), constant over each `step` seconds of `t`."""
    return 2.0 * unit(seed, key, math.floor(t / step)) - 1.0


@dataclass(frozen=True)
class Wave:
    """A square wave plus a slow sine wobble.

    The value is `high` during the first `duty` fraction of each `period` and `low` during
    the rest (a training step: communication burst, then compute), shifted by `phase`
    (a fraction of a period), plus `wobble * sin(2*pi*t/wobble_period + wobble_phase)`.
    `period == 0` means constant `high`. Keep `wobble <= min(high, low)` for rates, so the
    integral of a non-negative rate never decreases.
    """

    high: float
    low: float = 0.0
    period: float = 0.0
    duty: float = 1.0
    phase: float = 0.0
    wobble: float = 0.0
    wobble_period: float = 97.0
    wobble_phase: float = 0.0

    def _square(self, t: float) -> float:
        if self.period <= 0:
            return self.high
        frac = (t / self.period + self.phase) % 1.0
        return self.high if frac < self.duty else self.low

    def _square_cum(self, t: float) -> float:
        # Integral of the square part from the start of period 0 (phase included).
        if self.period <= 0:
            return self.high * t
        u = t / self.period + self.phase
        whole = math.floor(u)
        frac = u - whole
        per_period = self.high * self.duty + self.low * (1.0 - self.duty)
        part = self.high * min(frac, self.duty) + self.low * max(0.0, frac - self.duty)
        return self.period * (whole * per_period + part)

    def _wobble_cum(self, t: float) -> float:
        if not self.wobble:
            return 0.0
        w = 2.0 * math.pi / self.wobble_period
        return -self.wobble / w * math.cos(w * t + self.wobble_phase)

    def value(self, t: float) -> float:
        v = self._square(t)
        if self.wobble:
            w = 2.0 * math.pi / self.wobble_period
            v += self.wobble * math.sin(w * t + self.wobble_phase)
        return v

    def integral(self, a: float, b: float) -> float:
        if b <= a:
            return 0.0
        return (self._square_cum(b) - self._square_cum(a)) + (
            self._wobble_cum(b) - self._wobble_cum(a)
        )

    def mean(self, a: float, b: float) -> float:
        """Average over [a, b]; the value at `b` when the window is empty."""
        if b - a <= 1e-9:
            return self.value(b)
        return self.integral(a, b) / (b - a)


@dataclass(frozen=True)
class Lin:
    """`const + sum(coef * signal)`: linear combinations keep exact integrals."""

    const: float
    terms: tuple[tuple[float, Wave], ...] = ()

    def value(self, t: float) -> float:
        return self.const + sum(c * s.value(t) for c, s in self.terms)

    def integral(self, a: float, b: float) -> float:
        if b <= a:
            return 0.0
        return self.const * (b - a) + sum(c * s.integral(a, b) for c, s in self.terms)

    def mean(self, a: float, b: float) -> float:
        if b - a <= 1e-9:
            return self.value(b)
        return self.integral(a, b) / (b - a)
