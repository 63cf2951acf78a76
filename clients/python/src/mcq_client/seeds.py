"""Seeds of a batch's jobs, derived from the batch's base seed exactly as the
server derives them (docs/api.md, "Base seeds")."""

from __future__ import annotations

MAX_SEED = 2**53 - 1
"""Largest seed the server accepts, draws or derives: 2^53 − 1."""

_MASK = 2**64 - 1
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def job_seed(base: int, index: int) -> int:
    """The seed of job ``index`` (from 0, in submission order) of a batch
    submitted with base seed ``base``: output ``index`` of SplitMix64
    seeded with ``base``, its top 53 bits. Both arguments are taken modulo
    2^64, as the server's 64-bit arithmetic does."""
    z = (base + (index + 1) * _GOLDEN_GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) >> 11
