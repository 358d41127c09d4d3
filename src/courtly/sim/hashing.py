"""Stable, seed-derived integers and generators for the simulated web.

Everything random in the simulated web comes from `h(...)` (blake2b of the
parts' repr, never the salted built-in `hash()`), from `rng(...)`, a
`random.Random` seeded with such a hash, or, on hot paths, from `mix(a, b)`,
a splitmix64 finaliser over two integers (no strings: much cheaper). Same parts => same numbers, in every
process and on every machine.
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["h", "rng", "mix"]

_M64 = (1 << 64) - 1


def h(*parts: object) -> int:
    """A 64-bit integer that depends only on `parts`."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rng(*parts: object) -> random.Random:
    """A generator seeded by `h(*parts)`."""
    return random.Random(h(*parts))


def mix(a: int, b: int) -> int:
    """A 64-bit integer from two integers (splitmix64 finaliser): stable and cheap."""
    z = (a * 0x9E3779B97F4A7C15 + b * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)
