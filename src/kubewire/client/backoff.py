"""Exponential backoff with full jitter (AWS architecture blog "Exponential Backoff And
Jitter"; client-go ``wait.Backoff`` with jitter). Pure: chance is a ``random.Random``."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

INITIAL_DELAY_S = 0.5  # client-go reflector's backoff starts at 800 ms; a little sooner here
MAX_DELAY_S = 30.0  # client-go reflector caps at 30 s
FACTOR = 2.0


@dataclass(slots=True)
class Backoff:
    """``next_delay()`` grows the ceiling after each failure; ``reset()`` after a success.

    Each delay is uniform in ``[ceiling/2, ceiling]`` ("equal jitter"): never zero, so a
    flapping server is not hammered, and clients that failed together spread out.
    """

    initial_s: float = INITIAL_DELAY_S
    max_s: float = MAX_DELAY_S
    factor: float = FACTOR
    rng: random.Random = field(default_factory=random.Random)
    _attempt: int = 0

    def next_delay(self) -> float:
        ceiling = min(self.max_s, self.initial_s * self.factor ** self._attempt)
        self._attempt += 1
        return ceiling / 2 + self.rng.random() * ceiling / 2

    def reset(self) -> None:
        self._attempt = 0

    @property
    def attempts(self) -> int:
        return self._attempt
