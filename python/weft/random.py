"""Random arrays, ordered through each device's generator (weft.seed makes them repeatable)."""
from __future__ import annotations

from . import _weft
from ._weft import seed

__all__ = ["uniform", "normal", "seed"]


def uniform(low=0.0, high=1.0, shape=(1,), dtype=None, device=None):
    """Values drawn uniformly from [low, high)."""
    return _weft._uniform(float(low), float(high), shape, dtype, device)


def normal(loc=0.0, scale=1.0, shape=(1,), dtype=None, device=None):
    """Values drawn from the normal distribution N(loc, scale^2)."""
    return _weft._normal(float(loc), float(scale), shape, dtype, device)
