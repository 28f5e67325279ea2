"""NumPy-style conveniences of weft.NDArray, written over the native class: dtype, indexing,
conversions, reductions and shape methods. Arithmetic is native (weft/_weft)."""
from __future__ import annotations

import numbers

import numpy as np

from . import _weft
from ._weft import NDArray

_NUMPY_DTYPES = {
    "float32": np.dtype("float32"), "float64": np.dtype("float64"), "float16": np.dtype("float16"),
    "uint8": np.dtype("uint8"), "int8": np.dtype("int8"), "int16": np.dtype("int16"),
    "int32": np.dtype("int32"), "int64": np.dtype("int64"), "bool": np.dtype("bool"),
}


def _dtype(self):
    """The element type: a numpy.dtype (the string 'bfloat16' for bfloat16)."""
    name = self._dtype_name
    return _NUMPY_DTYPES.get(name, name)


def array(obj, dtype=None, device=None) -> NDArray:
    """A new array with a copy of `obj` (an NDArray, a NumPy array, a nested list or a scalar).

    Lists and scalars become float32 unless `dtype` says otherwise (as in MXNet); NumPy arrays
    keep their dtype (float64 included). The copy is made before this returns."""
    if isinstance(obj, NDArray):
        out = obj.copy() if device is None else obj._copy_to_device(device)
        return out if dtype is None or np.dtype(dtype) == _dtype(out) else out.astype(dtype)
    if isinstance(obj, np.ndarray):
        a = obj if dtype is None else obj.astype(dtype, copy=False)
        if not a.dtype.isnative:  # big-endian data: weft and DLPack are native-endian only
            a = a.astype(a.dtype.newbyteorder("="))
    else:
        if hasattr(obj, "__dlpack__") and dtype is None:
            try:
                imported = _weft.from_dlpack(obj)
            except (ValueError, TypeError, BufferError, RuntimeError):
                # Strided, or a dtype DLPack cannot carry (torch's bool): copy through NumPy.
                return array(np.asarray(obj), device=device)
            return array(imported, device=device)
        a = np.asarray(obj, dtype=dtype if dtype is not None else np.float32)
    # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
    return _weft._from_numpy(np.require(a, requirements="C"), device)


def asarray(obj, dtype=None, device=None) -> NDArray:
    """`obj` itself when it is already an NDArray of that dtype and device, else array(...)."""
    if isinstance(obj, NDArray) and (dtype is None or np.dtype(dtype) == _dtype(obj)) and (
            device is None or _weft.Device(str(device)) == obj.device):
        return obj
    return array(obj, dtype=dtype, device=device)


def zeros_like(x: NDArray) -> NDArray:
    return _weft.zeros(x.shape, x._dtype_name, x.device)


def ones_like(x: NDArray) -> NDArray:
    return _weft.ones(x.shape, x._dtype_name, x.device)


def concat(arrays, axis=0) -> NDArray:
    """Joins arrays along an existing axis."""
    return _weft._invoke("Concat", list(arrays), {"dim": axis, "num_args": len(arrays)})[0]


def stack(arrays, axis=0) -> NDArray:
    """Joins arrays along a new axis."""
    return _weft._invoke("stack", list(arrays), {"axis": axis, "num_args": len(arrays)})[0]


def _coerce(other, like: NDArray) -> NDArray:
    if isinstance(other, NDArray):
        return other
    return array(np.asarray(other, dtype=_dtype(like)), device=like.device)


# ---- indexing --------------------------------------------------------------------------------

def _normalize(key, ndim):
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = ndim - (len(key) - 1 - sum(1 for k in key if k is None))
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1:]
    return key


def _getitem(self, key):
    if isinstance(key, NDArray):
        return _weft._invoke("take", [self, key], {"axis": 0})[0] if _weft._has_op("take") else \
            _index_error("indexing with an array needs the 'take' operator")
    key = _normalize(key, self.ndim)
    shape = self.shape
    # Views: integers, then at most one slice of step 1, on the leading axes, with every later
    # axis whole.
    view = self
    axis = 0
    rest = list(key)
    while rest and isinstance(rest[0], numbers.Integral) and not isinstance(rest[0], bool):
        i = int(rest.pop(0))
        n = view.shape[0] if view.ndim else 0
        if view.ndim == 0:
            raise IndexError("too many indices for a 0-d array")
        if i < -n or i >= n:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        view = view._at(i % n)
        axis += 1
    if not rest:
        return view
    if isinstance(rest[0], slice) and all(
            isinstance(k, slice) and k == slice(None) for k in rest[1:]):
        start, stop, step = rest[0].indices(view.shape[0])
        if step == 1:
            return view._slice(start, max(start, stop))
    # General basic indexing: the 'slice' operator (a copy), then drop integer-indexed axes.
    begin, end, step, squeeze, newaxes = [], [], [], [], []
    out_axis = 0
    ax = 0
    for k in key:
        if k is None:
            newaxes.append(out_axis)
            out_axis += 1
            continue
        if ax >= len(shape):
            raise IndexError(f"too many indices: the array has {len(shape)} dimensions")
        n = shape[ax]
        if isinstance(k, slice):
            s, e, st = k.indices(n)
            begin.append(s)
            end.append(e if (e >= 0 or st > 0) else None)
            step.append(st)
            out_axis += 1
        elif isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)):
            i = int(k)
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for axis {ax} with size {n}")
            i %= n
            begin.append(i)
            end.append(i + 1)
            step.append(1)
            squeeze.append(ax)
        else:
            raise IndexError(f"weft arrays take ints, slices, None and ... as indices, got "
                             f"{type(k).__name__}")
        ax += 1
    out = _weft._invoke("slice", [self], {"begin": tuple(begin), "end": tuple(end),
                                         "step": tuple(step)})[0]
    if squeeze or newaxes:
        dims = [d for i, d in enumerate(out.shape) if i not in squeeze]
        for a in newaxes:
            dims.insert(a, 1)
        out = out.reshape(tuple(dims))
    return out


def _index_error(message):
    raise IndexError(message)


def _setitem(self, key, value):
    target = _getitem(self, key)
    if not target.shares_storage_with(self) and target.size > 0:
        raise IndexError("weft assigns through views only: integers and one step-1 slice on the "
                         "leading axes (x[i], x[a:b], x[i, a:b]); copy the part, change it and "
                         "write it back for other indices")
    if isinstance(value, numbers.Number):
        _weft._invoke("_full", [], {"shape": target.shape, "value": float(value),
                                    "dtype": target._dtype_name}, out=target)
        return
    src = _coerce(value, target)
    if src.shape != target.shape:
        if src.ndim < target.ndim:
            # NumPy's rule: missing leading axes have size 1 (broadcast_to wants equal ranks).
            src = src.reshape((1,) * (target.ndim - src.ndim) + src.shape)
        src = _weft._invoke("broadcast_to", [src], {"shape": target.shape})[0]
    if src._dtype_name != target._dtype_name:
        src = src.astype(target._dtype_name)
    src._copy_into(target)


# ---- shape, type and device ------------------------------------------------------------------

def _reshape(self, *shape, reverse=False):
    """A view with another shape (one dim may be -1); MXNet's special codes (0, -2, -3, -4) and
    `reverse` go through the Reshape operator (a copy)."""
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = tuple(shape[0])
    if not reverse and all(d >= -1 for d in shape) and 0 not in shape:
        return self._view(shape)
    return _weft._invoke("Reshape", [self], {"shape": shape, "reverse": reverse})[0]


def _astype(self, dtype, copy=True):
    """The values converted to `dtype` (a new array; this one when already of that dtype and
    copy=False)."""
    name = _weft_dtype_name(dtype)
    if name == self._dtype_name:
        return self.copy() if copy else self
    return _weft._invoke("Cast", [self], {"dtype": name})[0]


def _weft_dtype_name(dtype):
    if isinstance(dtype, str):
        return "bool" if dtype == "bool_" else dtype
    return np.dtype(dtype).name


def _copyto(self, other):
    """Copies into `other` (an NDArray of the same shape) or to a device (a new array)."""
    if isinstance(other, NDArray):
        self._copy_into(other)
        return other
    return self._copy_to_device(other)


def _to(self, device):
    """This array on `device` (itself when it is there already)."""
    d = device if isinstance(device, _weft.Device) else _weft.Device(str(device))
    return self if self.device == d else self._copy_to_device(d)


def _array(self, dtype=None, copy=None):
    a = self.asnumpy()
    return a if dtype is None else a.astype(dtype, copy=False)


def _tolist(self):
    return self.asnumpy().tolist()


def _op1(name, **fixed):
    def method(self, **kwargs):
        return _weft._invoke(name, [self], {**fixed, **kwargs})[0]
    method.__name__ = name
    method.__doc__ = f"weft.op.{name} of this array."
    return method


def _reduce(name):
    def method(self, axis=None, keepdims=False):
        attrs = {"keepdims": keepdims}
        if axis is not None:
            attrs["axis"] = axis
        return _weft._invoke(name, [self], attrs)[0]
    method.__name__ = name
    method.__doc__ = f"{name} over `axis` (all axes when None)."
    return method


def _argmax(self, axis=None, keepdims=False):
    x = self if axis is not None else self.reshape(-1)
    return _weft._invoke("argmax", [x], {"axis": 0 if axis is None else axis,
                                         "keepdims": keepdims})[0]


def _transpose(self, *axes):
    if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
        axes = tuple(axes[0])
    return _weft._invoke("transpose", [self], {"axes": axes} if axes else {})[0]


def _binary(same, broadcast, scalar, rscalar=None):
    def method(self, other):
        if isinstance(other, numbers.Number):
            return _weft._invoke(scalar, [self], {"scalar": float(other)})[0]
        other = _coerce(other, self)
        op = same if other.shape == self.shape else broadcast
        return _weft._invoke(op, [self, other])[0]

    def rmethod(self, other):
        if isinstance(other, numbers.Number):
            return _weft._invoke(rscalar, [self], {"scalar": float(other)})[0]
        other = _coerce(other, self)
        op = same if other.shape == self.shape else broadcast
        return _weft._invoke(op, [other, self])[0]
    return method, rmethod


def _matmul(self, other):
    other = _coerce(other, self)
    # dot contracts the last axis of self with the first of other: NumPy's matmul whenever other
    # has at most two axes, whatever self's rank. Stacks of matrices on both sides: batch_dot.
    if other.ndim <= 2:
        return _weft._invoke("dot", [self, other])[0]
    return _weft._invoke("batch_dot", [self, other])[0]


def _install():
    cls = NDArray
    cls.dtype = property(_dtype)
    cls.__getitem__ = _getitem
    cls.__setitem__ = _setitem
    cls.reshape = _reshape
    cls.astype = _astype
    cls.copyto = _copyto
    cls.to = _to
    cls.as_in_context = _to
    cls.__array__ = _array
    cls.__array_priority__ = 1000.0
    cls.tolist = _tolist
    cls.numpy = cls.asnumpy
    cls.__float__ = lambda self: float(self.item())
    cls.__int__ = lambda self: int(self.item())
    cls.__index__ = lambda self: int(self.item())
    cls.__bool__ = lambda self: bool(self.item())
    cls.__hash__ = object.__hash__
    cls.__iter__ = lambda self: (self[i] for i in range(len(self)))
    for name in ("sum", "mean", "max", "min", "prod"):
        if name != "prod" or _weft._has_op(name):
            setattr(cls, name, _reduce(name))
    cls.argmax = _argmax
    for name in ("exp", "log", "sqrt", "square", "abs", "relu", "sigmoid", "tanh", "sin", "cos",
                 "reciprocal", "negative"):
        setattr(cls, name, _op1(name))
    cls.__abs__ = lambda self: _weft._invoke("abs", [self])[0]
    cls.softmax = lambda self, axis=-1: _weft._invoke("softmax", [self], {"axis": axis})[0]
    cls.log_softmax = lambda self, axis=-1: _weft._invoke("log_softmax", [self], {"axis": axis})[0]
    cls.flatten = lambda self: _weft._invoke("Flatten", [self])[0]
    cls.expand_dims = lambda self, axis: _weft._invoke("expand_dims", [self], {"axis": axis})[0]
    cls.squeeze = lambda self, axis=None: _weft._invoke(
        "squeeze", [self], {} if axis is None else {"axis": axis})[0]
    cls.clip = lambda self, a_min, a_max: _weft._invoke(
        "clip", [self], {"a_min": a_min, "a_max": a_max})[0]
    cls.transpose = _transpose
    cls.T = property(lambda self: _transpose(self))
    cls.__matmul__ = _matmul
    cls.__rmatmul__ = lambda self, other: _matmul(_coerce(other, self), self)
    cls.__pow__, cls.__rpow__ = _binary("_power", "broadcast_power", "_power_scalar",
                                        "_rpower_scalar")
    for dunder, same, bc, sc, rsc in (
            ("eq", "_equal", "broadcast_equal", "_equal_scalar", "_equal_scalar"),
            ("ne", "_not_equal", "broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar"),
            ("lt", "_lesser", "broadcast_lesser", "_lesser_scalar", "_greater_scalar"),
            ("le", "_lesser_equal", "broadcast_lesser_equal", "_lesser_equal_scalar",
             "_greater_equal_scalar"),
            ("gt", "_greater", "broadcast_greater", "_greater_scalar", "_lesser_scalar"),
            ("ge", "_greater_equal", "broadcast_greater_equal", "_greater_equal_scalar",
             "_lesser_equal_scalar")):
        setattr(cls, f"__{dunder}__", _binary(same, bc, sc, rsc)[0])
    _weft._set_binary_fallback(_binary_fallback)


_ARITH = {
    "add": ("elemwise_add", "broadcast_add", "_plus_scalar", "_plus_scalar"),
    "sub": ("elemwise_sub", "broadcast_sub", "_minus_scalar", "_rminus_scalar"),
    "mul": ("elemwise_mul", "broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "truediv": ("elemwise_div", "broadcast_div", "_div_scalar", "_rdiv_scalar"),
}


def _binary_fallback(name, self, other, reflected):
    """Arithmetic with an operand that is neither an NDArray nor a Python number (a NumPy array
    or scalar, a list): converted to an array of this array's dtype and device."""
    if isinstance(other, np.generic) and np.ndim(other) == 0:
        other = other.item()
    try:
        fwd, rev = _binary(*_ARITH[name])
        return (rev if reflected else fwd)(self, other)
    except (TypeError, ValueError):
        if isinstance(other, (np.ndarray, list, tuple, numbers.Number)):
            raise
        return NotImplemented


_install()


# ---- files -----------------------------------------------------------------------------------

def load(path, device=None):
    """Loads an MXNet `.params` file (a dict of name -> NDArray, or a list) or a `.npy` file."""
    return _weft._load(str(path), device)


def save(path, data):
    """Saves a dict of name -> NDArray or a list of NDArrays as an MXNet `.params` file, or one
    NDArray as `.npy` when `path` ends with .npy. Waits for pending writes first."""
    _weft._save(str(path), data)
