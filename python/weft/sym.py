"""Symbolic composition, MXNet style: every registered operator as a function over Symbols,
generated from the registry like weft.op, plus variables, groups and loading.

    >>> data = weft.sym.Variable("data")
    >>> fc1 = weft.sym.FullyConnected(data, num_hidden=128, name="fc1")
    >>> act = weft.sym.Activation(fc1, act_type="relu", name="relu1")
    >>> net = weft.sym.SoftmaxOutput(weft.sym.FullyConnected(act, num_hidden=10, name="fc2"),
    ...                              name="softmax")
    >>> net.list_arguments()
    ['data', 'fc1_weight', 'fc1_bias', 'fc2_weight', 'fc2_bias', 'softmax_label']

Inputs left out (or None) become variables named ``<name>_<input>``; ops without a name get
``<op in lower case><n>`` (counted per ``name_scope``). ``attr=`` adds node attributes such as
``{"__lr_mult__": "0.1"}``. Symbols support ``+ - * / **`` with symbols and numbers.
"""
from __future__ import annotations

import numbers
import os
import sys

from . import _opgen, _weft
from ._weft import Symbol

_module = sys.modules[__name__]
_RESERVED = {"Symbol", "Variable", "var", "Group", "load", "load_json", "name_scope", "refresh",
             "list", "describe", "numbers", "os", "sys"}
_known_ops: set[str] = set()


def Variable(name, shape=None, dtype=None, attr=None, lr_mult=None, wd_mult=None, init=None,
             **kwargs) -> Symbol:  # noqa: N802 - MXNet's name
    """A variable: a graph input or a learned parameter.

    shape: declared shape (0 or -1 for dimensions inferred later); dtype: declared type;
    attr: extra attributes (strings); lr_mult, wd_mult, init: stored as ``__lr_mult__``,
    ``__wd_mult__``, ``__init__`` as MXNet does; other keywords become ``__key__``."""
    attrs = dict(attr or {})
    for key, value in (("lr_mult", lr_mult), ("wd_mult", wd_mult), *kwargs.items()):
        if value is not None:
            attrs[f"__{key}__"] = value
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    return Symbol.var(name, shape, dtype, attrs)


var = Variable


def Group(symbols) -> Symbol:  # noqa: N802 - MXNet's name
    """A symbol with the outputs of every symbol in ``symbols``, in order."""
    return Symbol.group([*symbols])


def load(path) -> Symbol:
    """Reads an MXNet symbol JSON file."""
    return Symbol.load(os.fspath(path))


def load_json(text: str) -> Symbol:
    """Parses MXNet symbol JSON text."""
    return Symbol.from_json(text)


def name_scope(prefix=""):
    """A context manager: ops created inside without a name are counted from 0 again, and every
    op name gets ``prefix`` in front (MXNet's NameManager and Prefix). Variables keep their
    names."""
    return _weft._NameScope(prefix)


def _weft_apply(op_name, inputs, attrs, name=None, attr=None):
    if attr:
        attrs = {**attrs, **attr}
    return Symbol._op(op_name, inputs, attrs, name)


def _weft_install(desc):
    fn = _opgen.make_function(desc, _weft_apply, "Symbol", extra=(("name", None), ("attr", None)))
    for n in [desc["name"], *desc.get("aliases", [])]:
        if n in _RESERVED:
            continue
        setattr(_module, _opgen._py_name(n), fn)
        _known_ops.add(n)
    return fn


def refresh():
    """Adds functions for operators registered since the last refresh."""
    for desc in _weft._list_ops():
        if desc["name"] not in _known_ops:
            _weft_install(desc)


def __getattr__(name):
    if _weft._has_op(name):
        return _weft_install(_weft._describe_op(name))
    raise AttributeError(f"module 'weft.sym' has no operator '{name}' (weft.op.list() names "
                         f"every registered one)")


def list():  # noqa: A001 - mirrors weft.op
    """The names of every registered operator (aliases not included)."""
    return [d["name"] for d in _weft._list_ops()]


def describe(name):
    """The registry's description of operator `name`."""
    return _weft._describe_op(name)


# ---- arithmetic on symbols --------------------------------------------------------------------

# dunder: (symbol op, scalar op, reflected scalar op). Symbol (op) symbol is elementwise with
# equal shapes, as in MXNet; use weft.sym.broadcast_* for broadcasting.
_ARITH = {
    "add": ("elemwise_add", "_plus_scalar", "_plus_scalar"),
    "sub": ("elemwise_sub", "_minus_scalar", "_rminus_scalar"),
    "mul": ("elemwise_mul", "_mul_scalar", "_mul_scalar"),
    "truediv": ("elemwise_div", "_div_scalar", "_rdiv_scalar"),
    "pow": ("_power", "_power_scalar", "_rpower_scalar"),
}


def _arith(same, scalar, rscalar):
    def method(self, other):
        if isinstance(other, Symbol):
            return Symbol._op(same, [self, other], {}, None)
        if isinstance(other, numbers.Number):
            return Symbol._op(scalar, [self], {"scalar": float(other)}, None)
        return NotImplemented

    def rmethod(self, other):
        if isinstance(other, numbers.Number):
            return Symbol._op(rscalar, [self], {"scalar": float(other)}, None)
        return NotImplemented
    return method, rmethod


def _install_arithmetic():
    for dunder, ops in _ARITH.items():
        fwd, rev = _arith(*ops)
        setattr(Symbol, f"__{dunder}__", fwd)
        setattr(Symbol, f"__r{dunder}__", rev)
    Symbol.__neg__ = lambda self: Symbol._op("_mul_scalar", [self], {"scalar": -1.0}, None)
    Symbol.__iter__ = lambda self: (self[i] for i in range(len(self)))
    Symbol.__reduce__ = lambda self: (load_json, (self.tojson(),))
    Symbol.__copy__ = lambda self: self
    Symbol.__deepcopy__ = lambda self, memo: self


_install_arithmetic()
refresh()
