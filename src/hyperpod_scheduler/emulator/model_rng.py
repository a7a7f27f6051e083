"""Seeded randomness whose whole state is two integers, so it persists in one small row.

Draw ``n`` is a hash of (seed, n): the same seed and the same sequence of draws give the same run,
and a restarted emulator continues the sequence from the stored counter.
"""

from __future__ import annotations

import hashlib
import string

_ALNUM = string.ascii_lowercase + string.digits


class Rng:
    def __init__(self, seed: int, counter: int = 0) -> None:
        self.seed = seed
        self.counter = counter

    def _bytes(self, size: int) -> bytes:
        digest = hashlib.blake2b(f"{self.seed}:{self.counter}".encode(), digest_size=size).digest()
        self.counter += 1
        return digest

    def random(self) -> float:
        """A float in [0, 1)."""
        return int.from_bytes(self._bytes(8), "big") / 2.0**64

    def uniform(self, lo: float, hi: float) -> float:
        return lo if hi <= lo else lo + (hi - lo) * self.random()

    def hex(self, length: int) -> str:
        return self._bytes((length + 1) // 2).hex()[:length]

    def alnum(self, length: int) -> str:
        raw = self._bytes(length)
        return "".join(_ALNUM[b % len(_ALNUM)] for b in raw)

    def choice_index(self, n: int) -> int:
        return int(self.random() * n) if n > 0 else 0

    # Identifiers in the real formats.
    def cluster_id(self) -> str:
        return self.alnum(12)

    def instance_id(self) -> str:
        return "i-" + self.hex(17)

    def event_id(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def private_ip(self) -> str:
        b = self._bytes(2)
        return f"10.1.{b[0]}.{max(b[1], 4)}"
