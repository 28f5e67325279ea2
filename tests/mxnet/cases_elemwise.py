"""Cases for elementwise operators: activations, arithmetic, scalar forms, unary math,
comparisons, reductions and products."""
from __future__ import annotations

import numpy as np


SELU_NOTE = ("E7: MXNet's selu gradient for x < 0 is lambda*(y + alpha) instead of "
             "lambda*alpha*exp(x) = y + lambda*alpha")


def first_output(op):
    def call(*inputs, **attrs):
        import mxnet as mx
        out = getattr(mx.nd, op)(*inputs, **attrs)
        return out[0] if isinstance(out, (list, tuple)) else out
    return call


def add_activations(b):
    for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
        for shape in ((3, 4), (2, 3, 4, 5)):
            b.add("Activation", f"{act}{shape}", [b.away(*shape, low=-4, high=4)], {"act_type": act})
    # softrelu returns x itself above 20 (MXNet's softrelu: x > 20 ? x : log1p(exp(x)))
    x = np.array([-30, -5, 0.5, 19.5, 20.5, 25, 40], dtype=np.float32)
    b.add("Activation", "softrelu_large", [x], {"act_type": "softrelu"})
    for act in ("leaky", "elu", "selu", "gelu"):
        for shape in ((4, 5), (2, 3, 4, 4)):
            attrs = {"act_type": act}
            if act in ("leaky", "elu"):
                attrs["slope"] = b.pick(["0.25", "0.1", "1.5"])
            b.add("LeakyReLU", f"{act}{shape}", [b.away(*shape, low=-3, high=3)], attrs,
                  expected=SELU_NOTE if act == "selu" else None, expected_arrays=("grad0",))
    b.add("LeakyReLU", "default_attrs", [b.away(3, 7)], {})
    # prelu: gamma per channel (axis 1) and shared (1,)
    b.add("LeakyReLU", "prelu_channel", [b.away(2, 3, 4, 4), b.u(3, low=0.05, high=0.5)], {"act_type": "prelu"})
    b.add("LeakyReLU", "prelu_shared", [b.away(2, 3, 5), b.u(1, low=0.05, high=0.5)], {"act_type": "prelu"})
    b.add("LeakyReLU", "prelu_2d", [b.away(4, 6), b.u(6, low=0.05, high=0.5)], {"act_type": "prelu"})
    # rrelu: inference uses the mean slope (training draws random slopes)
    # MXNet 1.9.1 makes rrelu's mask a second visible output (E11); the output is compared
    b.add("LeakyReLU", "rrelu_infer", [b.away(3, 4, 5)],
          {"act_type": "rrelu", "lower_bound": "0.1", "upper_bound": "0.3"}, backward=False,
          mx_call=first_output("LeakyReLU"))


BINARY = ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_power", "_maximum", "_minimum")
BROADCAST = ("broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_power",
             "broadcast_maximum", "broadcast_minimum")
BROADCAST_SHAPES = [((2, 3, 4, 5), (2, 3, 1, 1)), ((3, 1, 5), (1, 4, 1)), ((4, 5), (5,)), ((1,), (3, 2)),
                    ((2, 3), (2, 3)), ((2, 1, 4), (3, 1))]


def operands(b, op, shape_a, shape_b):
    if "power" in op:
        return [b.u(*shape_a, low=0.5, high=2.0), b.u(*shape_b, low=-1.5, high=1.5)]
    if "div" in op:
        return [b.u(*shape_a), b.away(*shape_b, gap=0.3)]
    if "maximum" in op or "minimum" in op:
        x = b.distinct(*shape_a)
        y = b.u(*shape_b)
        if shape_a == shape_b:  # keep ties away: |x - y| >= 0.01
            y = np.where(np.abs(x - y) < 0.01, y + 0.02, y).astype(np.float32)
        return [x, y]
    return [b.u(*shape_a), b.u(*shape_b)]


def add_arithmetic(b):
    for op in BINARY:
        for shape in ((5,), (3, 4), (2, 3, 4)):
            b.add(op, f"{shape}", operands(b, op, shape, shape))
    for op in BROADCAST:
        for sa, sb in BROADCAST_SHAPES:
            b.add(op, f"{sa}x{sb}", operands(b, op, sa, sb))
    arrays = [b.u(3, 4) for _ in range(5)]
    for k in (1, 2, 3, 5):
        b.add("add_n", f"n{k}", arrays[:k], {"num_args": k})
    # scalar forms
    for op, scalar, positive in (("_plus_scalar", 1.5, False), ("_minus_scalar", 127.5, False),
                                 ("_rminus_scalar", -0.5, False), ("_mul_scalar", 0.0078125, False),
                                 ("_div_scalar", 3.0, False), ("_rdiv_scalar", 2.0, False),
                                 ("_power_scalar", 2.5, True), ("_rpower_scalar", 1.7, False),
                                 ("_maximum_scalar", 0.3, False), ("_minimum_scalar", -0.2, False)):
        x = b.u(3, 4, 5, low=0.3, high=2.0) if positive else b.away(3, 4, 5, gap=0.2)
        if op in ("_maximum_scalar", "_minimum_scalar"):
            x = np.where(np.abs(x - scalar) < 0.01, x + 0.05, x).astype(np.float32)
        b.add(op, f"s{scalar}", [x], {"scalar": scalar})
    b.add("_mul_scalar", "default_scalar", [b.u(4)], {})
    b.add("_minus_scalar", "negative_scalar", [b.u(2, 3)], {"scalar": -2.25})


def add_unary(b):
    pos = lambda *s: b.u(*s, low=0.2, high=3.0)  # noqa: E731
    for op, make in (("relu", lambda: b.away(3, 4)), ("sigmoid", lambda: b.u(3, 4, low=-5, high=5)),
                     ("tanh", lambda: b.u(3, 4, low=-3, high=3)), ("exp", lambda: b.u(3, 4)),
                     ("log", lambda: pos(3, 4)), ("sqrt", lambda: pos(3, 4)), ("square", lambda: b.u(3, 4)),
                     ("abs", lambda: b.away(3, 4)), ("negative", lambda: b.u(3, 4)),
                     ("reciprocal", lambda: b.away(3, 4, gap=0.3)), ("sin", lambda: b.u(3, 4, low=-4, high=4)),
                     ("cos", lambda: b.u(3, 4, low=-4, high=4)), ("_copy", lambda: b.u(2, 3, 4)),
                     ("zeros_like", lambda: b.u(2, 3)), ("ones_like", lambda: b.u(2, 3))):
        b.add(op, "f32", [make()])
    x = b.u(4, 5)
    x = np.where(np.abs(np.abs(x) - 0.7) < 0.02, x * 0.5, x).astype(np.float32)
    b.add("clip", "sym", [x], {"a_min": -0.7, "a_max": 0.7})
    b.add("clip", "asym", [b.u(3, 6)], {"a_min": -3.0, "a_max": 0.25})
    cond = (b.rng.uniform(size=(3, 4)) > 0.5).astype(np.float32)
    b.add("where", "same_shape", [cond, b.u(3, 4), b.u(3, 4)], grad=[1, 2])
    cond = (b.rng.uniform(size=(3,)) > 0.5).astype(np.float32)
    b.add("where", "row_condition", [cond, b.u(3, 4), b.u(3, 4)], grad=[1, 2])
    for dtype in ("float64", "float32"):
        b.add("Cast", f"to_{dtype}", [b.u(3, 4)], {"dtype": dtype})
    b.add("Cast", "to_int32", [b.u(3, 4, low=-5, high=5)], {"dtype": "int32"}, backward=False)
    b.add("Cast", "f64_to_f32", [b.u(2, 5).astype(np.float64)], {"dtype": "float32"})


COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal")


def add_comparisons(b):
    def ints(*shape):
        return b.rng.integers(-2, 3, size=shape).astype(np.float32)

    for cmp in COMPARISONS:
        b.add(f"_{cmp}", "same_shape", [ints(3, 4), ints(3, 4)])
        b.add(f"broadcast_{cmp}", "bcast", [ints(2, 3, 1), ints(1, 4)])
        b.add(f"_{cmp}_scalar", "scalar", [ints(3, 4)], {"scalar": 1.0})


def add_reductions(b):
    x = b.distinct(2, 3, 4, 5)
    for op in ("sum", "mean", "max", "min"):
        for attrs in ({}, {"axis": 1}, {"axis": "(0, 2)", "keepdims": True}, {"axis": -1},
                      {"axis": "(1, 3)", "exclude": True}, {"axis": "()"}):
            name = ",".join(f"{k}={v}" for k, v in attrs.items()) or "all"
            b.add(op, name, [x], attrs)
    for op in ("argmax", "argmin"):
        for attrs in ({"axis": 1}, {"axis": -1, "keepdims": True}, {"axis": 0}):
            b.add(op, ",".join(f"{k}={v}" for k, v in attrs.items()), [x], attrs)
        b.add(op, "all", [b.distinct(3, 4)], {}, expected=None)


def add_products(b):
    for ta in (False, True):
        for tb in (False, True):
            a = b.u(*((6, 4) if ta else (4, 6)))
            c = b.u(*((5, 6) if tb else (6, 5)))
            b.add("dot", f"ta={ta},tb={tb}", [a, c], {"transpose_a": ta, "transpose_b": tb})
            a = b.u(*((3, 6, 4) if ta else (3, 4, 6)))
            c = b.u(*((3, 5, 6) if tb else (3, 6, 5)))
            b.add("batch_dot", f"ta={ta},tb={tb}", [a, c], {"transpose_a": ta, "transpose_b": tb})
    b.add("dot", "vector", [b.u(7), b.u(7)])
    b.add("dot", "nd_by_nd", [b.u(2, 3, 4), b.u(4, 5, 2)])
    b.add("dot", "matrix_vector", [b.u(3, 4), b.u(4)])


def add_cases(b):
    add_activations(b)
    add_arithmetic(b)
    add_unary(b)
    add_comparisons(b)
    add_reductions(b)
    add_products(b)
