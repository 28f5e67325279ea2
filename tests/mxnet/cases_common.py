"""The case record of ops_check.py, input helpers, and the list of every case (cases_*.py)."""
from __future__ import annotations

import numpy as np


class Case:
    """One operator call: attributes, inputs, which inputs get gradients, how to compare.

    op: weft's (and MXNet's) operator name. attrs: MXNet spellings, string values.
    inputs: numpy arrays in the op's input order. grad: indices of inputs that get a gradient
    (default: every floating input); backward=False checks the forward pass only.
    is_train: training mode (both for forward and backward). dump: inputs mutated by the op
    (BatchNorm's moving statistics) compared after the run. tol: (rtol, atol) overriding the op's.
    expected: the docs/MXNET.md exception that explains a difference; expected_arrays: the arrays
    ("out0", "grad0", ...) it covers (None: the whole case, e.g. when MXNet rejects the call).
    check: f(case, weft_outputs, weft_grads) -> error message or "" for checks beyond equality
    (random ops). skip_compare: names ("out1", "grad0", ...) not compared element-wise.
    mx_call: f(*nd_inputs, **attrs) replacing the MXNet op of the same name (mx_name: another name).
    reference: f(inputs) -> outputs computed with numpy instead of MXNet, for the few cases that
    MXNet cannot run safely (forward only).
    """

    def __init__(self, op, name, inputs, attrs=None, grad=None, backward=True, is_train=False,
                 dump=(), tol=None, expected=None, expected_arrays=None, check=None, skip_compare=(), mx_call=None,
                 mx_name=None, reference=None, rng=None):
        self.op = op
        self.name = name
        self.id = f"{op}/{name}"
        self.inputs = [np.ascontiguousarray(a) for a in inputs]
        self.attrs = {k: str(v) for k, v in (attrs or {}).items()}
        if grad is None:
            grad = [i for i, a in enumerate(self.inputs) if a.dtype.kind == "f"]
        self.grad_inputs = list(grad)
        self.backward = backward and bool(self.grad_inputs)
        self.is_train = is_train
        self.dump_inputs = list(dump)
        self.tol = tol
        self.expected = expected
        self.expected_arrays = None if expected_arrays is None else set(expected_arrays)
        self.check = check
        self.skip_compare = set(skip_compare)
        self.mx_call = mx_call
        self.mx_name = mx_name
        self.reference = reference
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.head_grads = None
        self.mx_outputs = None
        self.mx_grads = None
        self.mx_dumps = {}
        self.prefix = None


def mx_op(mx, name):
    """MXNet's imperative function for a registered op name."""
    for module in (mx.nd, mx.nd._internal, mx.nd.contrib):
        fn = getattr(module, name, None)
        if fn is not None:
            return fn
    if name.startswith("_contrib_"):
        return getattr(mx.nd.contrib, name[len("_contrib_"):])
    raise AttributeError(f"MXNet has no operator {name}")


class Builder:
    """Collects cases with a shared seeded generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.cases = []
        self.counts = {}

    def u(self, *shape, low=-2.0, high=2.0):
        """Uniform float32 values."""
        return self.rng.uniform(low, high, size=shape).astype(np.float32)

    def n(self, *shape, scale=1.0):
        """Normal float32 values."""
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def away(self, *shape, gap=0.05, low=-2.0, high=2.0):
        """Uniform values at least `gap` from 0 (kinks of relu-like functions)."""
        x = self.rng.uniform(low, high, size=shape)
        x = np.where(np.abs(x) < gap, np.sign(x + 1e-12) * gap + x, x)
        return x.astype(np.float32)

    def distinct(self, *shape, low=-2.0, high=2.0):
        """Values with no two equal and no near-ties (max pooling, max/min reductions)."""
        size = int(np.prod(shape)) if shape else 1
        grid = np.linspace(low, high, size)
        return self.rng.permutation(grid).reshape(shape).astype(np.float32)

    def add(self, op, name=None, inputs=(), attrs=None, **kw):
        k = self.counts.get(op, 0)
        self.counts[op] = k + 1
        case = Case(op, name or str(k), list(inputs), attrs, rng=np.random.default_rng(self.rng.integers(1 << 31)),
                    **kw)
        self.cases.append(case)
        return case

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]


def tup(values):
    """MXNet's tuple spelling: (3, 3)."""
    values = list(values)
    if len(values) == 1:
        return f"({values[0]},)"
    return "(" + ", ".join(str(v) for v in values) + ")"


def all_cases(seed):
    import cases_elemwise
    import cases_nn
    import cases_shape
    import cases_misc
    import cases_image

    b = Builder(seed)
    # cases_image last: every case draws from the shared generator (earlier cases keep theirs)
    for module in (cases_elemwise, cases_shape, cases_nn, cases_misc, cases_image):
        module.add_cases(b)
    return b.cases
