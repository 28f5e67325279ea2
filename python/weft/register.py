"""Operators written in Python, and plugins of operators written in C.

    >>> import numpy as np
    >>> def tanh_grad(out_grads, inputs, outputs, scale):
    ...     return [out_grads[0] * (scale - outputs[0] ** 2 / scale)]
    >>> @weft.register_op("scaled_tanh", params={"scale": 1.0}, backward=tanh_grad)
    ... def scaled_tanh(x, scale):
    ...     return scale * np.tanh(x)
    >>> weft.op.scaled_tanh(weft.array([0.0, 1.0]), scale=2.0).asnumpy()
    array([0.       , 1.5231884], dtype=float32)

A registered operator is an operator like any other: ``weft.op.<name>`` calls it, autograd
differentiates it (when it has a backward), and graphs and JSON models may use it by name.

How the functions are called:

* They run on one of weft's engine threads (or on the calling thread for small arrays), holding
  the GIL for the duration of the call, and possibly concurrently with the thread that pushed
  them: they must be thread-safe with respect to the rest of the program.
* Their inputs are NumPy arrays that view weft's memory, marked read-only. The views (and any
  NumPy view derived from them) are valid only during the call: keeping one (in a global, a
  closure, an attribute) fails the operation, as the memory may be reused as soon as it returns.
  Keep a copy (``numpy.array(x)``) instead.
* They must not wait on weft arrays (``asnumpy()``, ``wait_to_read()``, ``waitall()`` raise
  inside an operation); compute with NumPy.
* An exception they raise fails the operation. It surfaces at the next wait on an array the
  operation writes (``asnumpy()``, ``wait_to_read()``, or ``waitall()``), once, as the same
  exception type, with the operator's name and the last lines of its traceback. The engine
  remains usable.

Operators are never removed: a registered name stays taken, and the functions stay alive, for
the life of the process.
"""
from __future__ import annotations

import keyword
import numbers
import os
import sys
import traceback

import numpy as np

from . import _opgen, _weft
from ._weft import ShapeError

__all__ = ["register_op", "load_plugin"]

# OpReq, as the kernels receive it.
_NULL, _WRITE, _INPLACE, _ADD = 0, 1, 2, 3
# Keyword arguments of every weft.op function: no input or parameter may take these names.
_EXTRA_ARGS = {"out", "name"}
# Parameter type codes understood by the native registration.
_REQUIRED_TYPES = {int: "int", float: "float", bool: "bool", str: "str", tuple: "shape"}


def _plain(exc_type, message):
    """An exception raised by the checks here: reported as it is, without a traceback."""
    exc = exc_type(message)
    exc._weft_plain = True
    return exc


class _PythonOp:
    """The object behind a registered operator; the native kernels call its methods with the
    GIL held. Inputs and outputs are lists of NumPy views, `req` holds one OpReq per output."""

    def __init__(self, name, forward, backward, infer_shape, infer_type, input_names,
                 output_names, writes_outputs):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.infer_shape_fn = infer_shape
        self.infer_type_fn = infer_type
        self.input_names = input_names
        self.output_names = output_names
        self.num_inputs = len(input_names)
        self.num_outputs = len(output_names)
        self.writes_outputs = writes_outputs

    # ---- kernels ----

    def run_forward(self, inputs, outputs, req, params):
        if self.writes_outputs:
            # Outputs that accumulate (or are not wanted) get scratch arrays, added afterwards.
            targets = [o if r in (_WRITE, _INPLACE) else np.empty_like(o)
                       for o, r in zip(outputs, req)]
            self.forward(inputs, targets, **params)
            for o, t, r in zip(outputs, targets, req):
                if r == _ADD:
                    np.add(o, t, out=o, casting="same_kind")
            return
        result = self.forward(*inputs, **params)
        values = self._split(result, self.num_outputs, "forward", "output")
        self._store("forward", "output", self.output_names, values, outputs, req, False)

    def run_backward(self, inputs, outputs, req, params):
        no, ni = self.num_outputs, self.num_inputs
        out_grads, xs, ys = inputs[:no], inputs[no:no + ni], inputs[no + ni:]
        result = self.backward(out_grads, xs, ys, **params)
        values = self._split(result, ni, "backward", "input")
        self._store("backward", "the gradient of input", self.input_names, values, outputs, req,
                    True)

    def _split(self, result, n, stage, what):
        one = isinstance(result, (tuple, list)) and len(result) == 1 and (
            result[0] is None or isinstance(result[0], np.ndarray))
        if isinstance(result, (tuple, list)) and (n > 1 or one):
            values = list(result)
        else:
            values = [result]
        if len(values) != n:
            raise _plain(ValueError, f"op '{self.name}': {stage} returned {len(values)} "
                                     f"values; one per {what} ({n}) is needed")
        return values

    def _store(self, stage, what, names, values, outputs, req, none_is_zero):
        for i, (value, out, r) in enumerate(zip(values, outputs, req)):
            if r == _NULL:
                continue
            label = f"{what} {i} ('{names[i]}')"
            if value is None:
                if not none_is_zero:
                    raise _plain(ValueError, f"op '{self.name}': {stage} returned None for "
                                             f"{label}")
                if r != _ADD:
                    out[...] = 0
                continue
            a = np.asarray(value)
            if a.shape != out.shape:
                raise _plain(ShapeError, f"op '{self.name}': {stage} returned an array of shape "
                                         f"{a.shape} for {label}, which has shape {out.shape}")
            if not np.can_cast(a.dtype, out.dtype, "same_kind"):
                raise _plain(ShapeError, f"op '{self.name}': {stage} returned an array of dtype "
                                         f"{a.dtype} for {label}, which is {out.dtype}")
            if r == _ADD:
                np.add(out, a, out=out, casting="same_kind")
            else:
                np.copyto(out, a, casting="same_kind")

    # ---- inference ----

    def infer_shape(self, in_shapes, params):
        result = self.infer_shape_fn(*in_shapes, **params)
        if isinstance(result, (tuple, list)) and all(_is_int(d) for d in result):
            result = [result]  # one shape: for an operator with one output
        if not isinstance(result, (tuple, list)):
            raise _plain(ShapeError, f"op '{self.name}': infer_shape returned {result!r}; a list "
                                     f"of shapes (one per output) is expected")
        shapes = []
        for s in result:
            if not isinstance(s, (tuple, list)) or not all(_is_int(d) and d >= 0 for d in s):
                raise _plain(ShapeError, f"op '{self.name}': infer_shape returned {s!r} as a "
                                         f"shape; a tuple of non-negative ints is expected")
            shapes.append(tuple(int(d) for d in s))
        if len(shapes) != self.num_outputs:
            raise _plain(ShapeError, f"op '{self.name}': infer_shape returned {len(shapes)} "
                                     f"shapes; the op has {self.num_outputs} outputs")
        return shapes

    def infer_type(self, in_dtypes, params):
        result = self.infer_type_fn(*[_np_dtype(t) for t in in_dtypes], **params)
        if not isinstance(result, (tuple, list)):
            result = [result]
        try:
            names = [np.dtype(t).name for t in result]
        except TypeError as e:
            raise _plain(ShapeError, f"op '{self.name}': infer_type returned {result!r}: "
                                     f"{e}") from None
        if len(names) != self.num_outputs:
            raise _plain(ShapeError, f"op '{self.name}': infer_type returned {len(names)} "
                                     f"dtypes; the op has {self.num_outputs} outputs")
        return names

    # ---- errors ----

    def format_error(self, stage, exc):
        """The message of the error `exc` raised in `stage`: "op 'name': Type: message" and the
        innermost lines of its traceback (those outside this module)."""
        if getattr(exc, "_weft_plain", False):
            return str(exc)
        label = {"run_forward": "", "run_backward": " (backward)"}.get(stage, f" ({stage})")
        message = f"op '{self.name}'{label}: {type(exc).__name__}: {exc}"
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if os.path.abspath(f.filename) != _THIS_FILE][-3:]
        if frames:
            message += ("\nTraceback (innermost frames):\n" +
                        "".join(traceback.format_list(frames)).rstrip("\n"))
        return message


_THIS_FILE = os.path.abspath(__file__)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _np_dtype(name):
    try:
        return np.dtype(name)
    except TypeError:
        return name  # a dtype NumPy lacks (bfloat16): its name


def _format_tuple(values):
    body = ", ".join(values)
    return f"({body},)" if len(values) == 1 else f"({body})"


def _param_spec(op, pname, value):
    """(name, type code, default text or None, description) for parameter `pname`."""
    where = f"register operator '{op}': parameter '{pname}'"
    if isinstance(value, type):
        if value not in _REQUIRED_TYPES:
            raise ValueError(f"{where}: the type {value.__name__} is not supported (int, float, "
                             f"bool, str or tuple)")
        return (pname, _REQUIRED_TYPES[value], None, "")
    if isinstance(value, (bool, np.bool_)):
        return (pname, "bool", "True" if value else "False", "")
    if _is_int(value):
        return (pname, "int", str(int(value)), "")
    if isinstance(value, numbers.Real):
        return (pname, "float", repr(float(value)), "")
    if isinstance(value, str):
        return (pname, "str", value, "")
    if isinstance(value, (tuple, list)):
        if all(_is_int(v) for v in value):
            return (pname, "shape", _format_tuple([str(int(v)) for v in value]), "")
        if all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
               for v in value):
            return (pname, "floats", _format_tuple([repr(float(v)) for v in value]), "")
    raise ValueError(f"{where}: the default {value!r} has no supported type (int, float, bool, "
                     f"str, a tuple of ints or of floats; or one of those types for a required "
                     f"parameter)")


def _check_names(op, names, count, what, stem):
    if names is None:
        return [stem] if count == 1 else [f"{stem}{i}" for i in range(count)]
    names = list(names)
    for n in names:
        if not isinstance(n, str) or not n.isidentifier() or keyword.iskeyword(n):
            raise ValueError(f"register operator '{op}': {what} name {n!r} is not a Python "
                             f"identifier")
        if n in _EXTRA_ARGS:
            raise ValueError(f"register operator '{op}': {what} name '{n}' is reserved (every "
                             f"weft.op function takes out= and name=)")
    if len(set(names)) != len(names):
        raise ValueError(f"register operator '{op}': {what} names {names} repeat")
    return names


def _count(op, value, names, what, lowest):
    if value is None:
        value = len(names) if names is not None else 1
    if not _is_int(value) or value < lowest or value > 64:
        raise ValueError(f"register operator '{op}': num_{what}s must be an int from {lowest} "
                         f"to 64, got {value!r}")
    if names is not None and len(list(names)) != value:
        raise ValueError(f"register operator '{op}': {len(list(names))} {what} names for "
                         f"num_{what}s={value}")
    return int(value)


def _refresh():
    """Adds functions for new operators to weft.op and weft.sym."""
    from . import op as _op
    _op.refresh()
    sym = sys.modules.get(__package__ + ".sym")
    if sym is not None and callable(getattr(sym, "refresh", None)):
        sym.refresh()


def register_op(name, forward=None, *, num_inputs=None, num_outputs=None, input_names=None,
                output_names=None, params=None, infer_shape=None, infer_type=None,
                backward=None, writes_outputs=False, description=""):
    """Registers operator `name`, computed by the Python function `forward`, and returns its
    weft.op function. Used as a decorator when `forward` is left out::

        @weft.register_op("gelu", backward=gelu_grad)
        def gelu(x):
            return 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))

    forward(*inputs, **params) gets the inputs as read-only NumPy views and returns one array per
    output (a tuple for several); the values are copied into the outputs, whose shape must match
    and whose dtype must be reachable by a same-kind cast. With ``writes_outputs=True`` it is
    called as forward(inputs, outputs, **params) and writes into the (writable) output views.

    Args:
        num_inputs, num_outputs: arity (default: the number of names given, else 1).
        input_names, output_names: names (default "data"/"output", or data0.. and output0..).
        params: {name: default}; the type (int, float, bool, str, a tuple of ints or of floats)
            comes from the default, and values given later are checked against it. A type in
            place of a default (``{"axis": int}``) makes the parameter required.
        infer_shape: infer_shape(*input_shapes, **params) -> a list of output shapes (or one
            shape for one output). Default: every output has input 0's shape.
        infer_type: infer_type(*input_dtypes, **params) -> a list of output dtypes (or one).
            Default: every output has input 0's dtype.
        backward: backward(out_grads, inputs, outputs, **params) -> one gradient per input
            (None: no gradient, i.e. zeros); each argument is a list of NumPy views. Registers
            the operator ``_backward_<name>`` and makes `name` differentiable.
        description: the operator's documentation.

    See this module's documentation for the threading and lifetime rules the functions follow.
    Raises ValueError when `name` is taken or the definition is invalid.
    """
    def define(fn):
        return _register(name, fn, num_inputs, num_outputs, input_names, output_names, params,
                         infer_shape, infer_type, backward, writes_outputs, description)

    if forward is None:
        return define
    return define(forward)


def _register(name, forward, num_inputs, num_outputs, input_names, output_names, params,
              infer_shape, infer_type, backward, writes_outputs, description):
    from . import op as _op
    if not isinstance(name, str):
        raise TypeError(f"register_op: the name must be a str, got {type(name).__name__}")
    if name in _op._RESERVED:
        raise ValueError(f"register operator '{name}': the name is reserved by weft.op")
    for what, fn in (("forward", forward), ("infer_shape", infer_shape),
                     ("infer_type", infer_type), ("backward", backward)):
        if fn is not None and not callable(fn):
            raise TypeError(f"register operator '{name}': {what} must be callable, got "
                            f"{type(fn).__name__}")
    nin = _count(name, num_inputs, input_names, "input", 0)
    nout = _count(name, num_outputs, output_names, "output", 1)
    ins = _check_names(name, input_names, nin, "input", "data")
    outs = _check_names(name, output_names, nout, "output", "output")
    if nin == 0 and infer_shape is None:
        raise ValueError(f"register operator '{name}': an operator without inputs needs "
                         f"infer_shape")
    specs = []
    for pname, value in (params or {}).items():
        if not isinstance(pname, str) or not pname.isidentifier():
            raise ValueError(f"register operator '{name}': parameter name {pname!r} is not a "
                             f"Python identifier")
        if pname in _EXTRA_ARGS or pname in ins:
            raise ValueError(f"register operator '{name}': parameter name '{pname}' is taken "
                             f"(by an input, or by weft.op's out= and name=)")
        specs.append(_param_spec(name, pname, value))
    spec = _PythonOp(name, forward, backward, infer_shape, infer_type, ins, outs,
                     bool(writes_outputs))
    _weft._register_python_op(name, spec, nin, nout, ins, outs, specs, infer_shape is not None,
                              infer_type is not None, backward is not None, str(description))
    _refresh()
    return getattr(_op, _opgen._py_name(name))


def load_plugin(path):
    """Loads a plugin (a shared library exporting weft_plugin_init, see docs/C_API.md) and
    registers its operators, which appear in weft.op at once. Loading a library twice does
    nothing the second time. Raises ValueError naming `path` when it cannot be loaded."""
    _weft.load_plugin(os.fspath(path))
    _refresh()
