"""Every registered operator as a function over NDArrays, generated from the registry (names,
inputs, parameters, defaults and docs come from the operators' schemas).

    >>> y = weft.op.FullyConnected(x, w, b, num_hidden=10)
    >>> z = weft.op.Pooling(y4d, kernel=(2, 2), pool_type="max", stride=(2, 2))

Inputs go positionally or by name; parameters by keyword (MXNet's spelling); ``out=`` writes
into existing arrays. Operators registered later (weft.register_op, weft.load_plugin, the C ABI)
appear here as soon as they exist. Every call returns before the kernel runs.
"""
from __future__ import annotations

import builtins
import numbers
import sys

import numpy as np

from . import _opgen, _weft
from ._weft import NDArray

_module = sys.modules[__name__]
# Names of this module that operators may not replace.
_RESERVED = {"refresh", "list", "describe", "NDArray", "np", "sys", "numbers", "builtins"}
_known_ops: set[str] = set()


def _weft_as_input(x, like):
    if isinstance(x, NDArray) or x is None:
        return x
    from .ndarray import array
    # builtins.list: this module's list() (the operator names) shadows the type.
    if like is not None and isinstance(x, (numbers.Number, builtins.list, tuple, np.ndarray)):
        return array(np.asarray(x, dtype=like.dtype), device=like.device)
    return array(x)


def _weft_apply(op_name, inputs, attrs, out=None, name=None):
    for i in inputs:
        if type(i) is not NDArray:  # the common case, arrays only, skips the conversion
            like = next((i for i in inputs if isinstance(i, NDArray)), None)
            inputs = [_weft_as_input(i, like) if i is not None else _weft._none()
                      for i in inputs]
            break
    # One entry point: the attributes are parsed once per distinct set by the attribute cache
    # every by-name caller shares (Note [Attribute cache] in ops/attr_cache.cc).
    if out is not None:
        _weft._invoke(op_name, inputs, attrs, out)
        return out
    outs = _weft._invoke(op_name, inputs, attrs)
    return outs[0] if len(outs) == 1 else outs


def _weft_install(desc):
    fn = _opgen.make_function(desc, _weft_apply, "NDArray")
    for n in [desc["name"], *desc.get("aliases", [])]:
        if n in _RESERVED:
            continue
        setattr(_module, _opgen._py_name(n), fn)
        _known_ops.add(n)
    return fn


def refresh():
    """Adds functions for operators registered since the last refresh (called by
    weft.register_op and weft.load_plugin; attribute lookup also finds new ones)."""
    for desc in _weft._list_ops():
        if desc["name"] not in _known_ops:
            _weft_install(desc)


def __getattr__(name):
    if _weft._has_op(name):
        return _weft_install(_weft._describe_op(name))
    raise AttributeError(f"module 'weft.op' has no operator '{name}' (weft.op.list() names "
                         f"every registered one)")


def list():  # noqa: A001 - mirrors MXNet's listing helpers
    """The names of every registered operator (aliases not included)."""
    return [d["name"] for d in _weft._list_ops()]


def describe(name):
    """The registry's description of operator `name`: inputs, outputs, parameters, kernels."""
    return _weft._describe_op(name)


refresh()
