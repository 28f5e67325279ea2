"""Input shapes as ``Layer.init`` and ``summary`` accept them, and the traced graph's input
names."""
from __future__ import annotations

import numbers

__all__ = ["input_shapes", "input_names"]


def _is_shape(x):
    return isinstance(x, (tuple, list)) and all(d is None or isinstance(d, numbers.Integral)
                                                for d in x)


def input_shapes(inputs):
    """Normalises what ``init`` accepts into a list of shapes (None or 0 where deferred):
    a shape, an array (NumPy or weft), a dict of name -> shape, or a list of those."""
    if isinstance(inputs, dict):
        return [tuple(_one_shape(v)) for v in inputs.values()]
    if _is_shape(inputs) and not isinstance(inputs, list):
        return [tuple(inputs)]
    if isinstance(inputs, (list, tuple)):
        if _is_shape(inputs) and inputs and not any(isinstance(d, (list, tuple)) for d in inputs):
            return [tuple(inputs)]
        return [tuple(_one_shape(v)) for v in inputs]
    return [tuple(_one_shape(inputs))]


def _one_shape(v):
    if hasattr(v, "shape"):
        return tuple(int(d) for d in v.shape)
    if _is_shape(v):
        return tuple(v)
    raise TypeError(f"init: expected a shape, an array or a dict of them, got {type(v).__name__}")


def input_names(n):
    """``data`` for one input, ``data0``, ``data1``... for several."""
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]
