"""Operators against NumPy float64 references: arithmetic, comparisons, math, reductions, linear
algebra, shapes, indexing, and weft.op's generated functions (keywords, schemas, errors)."""
import inspect

import numpy as np
import pytest

import weft

F32 = dict(rtol=1e-5, atol=1e-6)


def f32(rng, *shape, low=None, high=None):
    if low is not None:
        return rng.uniform(low, high, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def close(x, expected, **tol):
    """x (an NDArray) equals `expected` (computed in float64) element by element."""
    assert isinstance(x, weft.NDArray)
    got = x.asnumpy()
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    np.testing.assert_allclose(got.astype(np.float64), expected, **(tol or F32))


# ---- arithmetic ------------------------------------------------------------------------------

ARITH = [
    ("add", lambda p, q: p + q),
    ("sub", lambda p, q: p - q),
    ("mul", lambda p, q: p * q),
    ("div", lambda p, q: p / q),
]

BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((4,), (3, 4)),
    ((2, 1, 5), (3, 1)),
    ((2, 3, 1), (1, 3, 4)),
    ((5,), (1,)),
    ((2, 3), ()),
]


@pytest.mark.parametrize("name, f", ARITH)
@pytest.mark.parametrize("sa, sb", BROADCAST_SHAPES)
def test_arithmetic_broadcasting(rng, name, f, sa, sb):
    a = f32(rng, *sa)
    b = f32(rng, *sb, low=0.5, high=2.0) * rng.choice([-1, 1], sb).astype(np.float32)
    x, y = weft.array(a), weft.array(b)
    expected = f(a.astype(np.float64), b.astype(np.float64))
    close(f(x, y), expected)
    # A NumPy array on either side is converted to the array's dtype.
    close(f(x, b), expected)
    close(f(a, y), expected)


@pytest.mark.parametrize("name, f", ARITH)
@pytest.mark.parametrize("s", [2.5, -3, np.float32(0.75), np.float64(1.5), True])
def test_arithmetic_with_scalars_both_sides(rng, name, f, s):
    a = f32(rng, 3, 5, low=0.5, high=2.0)
    x = weft.array(a)
    sd = float(s)
    close(f(x, s), f(a.astype(np.float64), sd))
    close(f(s, x), f(sd, a.astype(np.float64)))


def test_arithmetic_keeps_dtype():
    x = weft.array(np.arange(1, 7, dtype=np.float64).reshape(2, 3))
    assert (x + 1).dtype == np.float64
    assert (x * x).dtype == np.float64
    i = weft.array(np.arange(6, dtype=np.int32))
    np.testing.assert_array_equal((i + 2).asnumpy(), np.arange(6) + 2)
    np.testing.assert_array_equal((i * i).asnumpy(), np.arange(6) ** 2)


def test_negation_and_abs(rng):
    a = f32(rng, 4, 3)
    x = weft.array(a)
    close(-x, -a.astype(np.float64))
    close(+x, a)
    close(abs(x), np.abs(a))


@pytest.mark.parametrize("name, f", ARITH)
@pytest.mark.parametrize("other", ["same", "row", "scalar", "numpy"])
def test_inplace_arithmetic(rng, name, f, other):
    a = f32(rng, 3, 4)
    b = {"same": f32(rng, 3, 4, low=0.5, high=2.0),
         "row": f32(rng, 4, low=0.5, high=2.0),
         "scalar": 1.75,
         "numpy": f32(rng, 4, low=0.5, high=2.0)}[other]
    x = weft.array(a)
    storage = x._storage_id
    view = x[1]
    ops = {"add": "__iadd__", "sub": "__isub__", "mul": "__imul__", "div": "__itruediv__"}
    rhs = weft.array(b) if other in ("same", "row") else b
    y = getattr(x, ops[name])(rhs)
    assert y is x and x._storage_id == storage
    expected = f(a.astype(np.float64), np.asarray(b, np.float64))
    close(x, expected)
    # In place: a view taken before sees the new values.
    close(view, expected[1])


def test_inplace_through_a_view(rng):
    a = f32(rng, 4, 3)
    x = weft.array(a)
    v = x[1:3]
    v *= 2
    expected = a.astype(np.float64)
    expected[1:3] *= 2
    close(x, expected)


def test_power(rng):
    a = f32(rng, 3, 4, low=0.5, high=2.0)
    b = f32(rng, 3, 4, low=-1.5, high=1.5)
    x, y = weft.array(a), weft.array(b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close(x ** 2, a64 ** 2)
    close(2 ** x, 2 ** a64)
    close(x ** y, a64 ** b64)
    close(x ** b[0], a64 ** b64[0])


# ---- comparisons -----------------------------------------------------------------------------

COMPARE = [
    ("eq", lambda p, q: p == q), ("ne", lambda p, q: p != q), ("lt", lambda p, q: p < q),
    ("le", lambda p, q: p <= q), ("gt", lambda p, q: p > q), ("ge", lambda p, q: p >= q),
]


@pytest.mark.parametrize("name, f", COMPARE)
def test_comparisons(rng, name, f):
    # Small integers as floats, so that ties occur.
    a = rng.integers(-2, 3, (4, 5)).astype(np.float32)
    b = rng.integers(-2, 3, (4, 5)).astype(np.float32)
    row = rng.integers(-2, 3, (5,)).astype(np.float32)
    x, y, r = weft.array(a), weft.array(b), weft.array(row)
    for got, expected in [(f(x, y), f(a, b)), (f(x, r), f(a, row)), (f(x, 1.0), f(a, 1.0)),
                          (f(1.0, x), f(1.0, a)), (f(x, b), f(a, b))]:
        assert got.dtype == np.float32  # MXNet's comparisons return the input dtype
        np.testing.assert_array_equal(got.asnumpy(), expected.astype(np.float32))


# ---- unary math ------------------------------------------------------------------------------

UNARY = [
    ("exp", np.exp, (-3, 3)), ("log", np.log, (0.1, 5)), ("sqrt", np.sqrt, (0, 5)),
    ("square", np.square, (-3, 3)), ("abs", np.abs, (-3, 3)),
    ("relu", lambda v: np.maximum(v, 0), (-3, 3)),
    ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), (-6, 6)), ("tanh", np.tanh, (-3, 3)),
    ("sin", np.sin, (-4, 4)), ("cos", np.cos, (-4, 4)), ("reciprocal", np.reciprocal, (0.2, 3)),
    ("negative", np.negative, (-3, 3)),
]


@pytest.mark.parametrize("name, ref, domain", UNARY)
def test_unary_math(rng, name, ref, domain):
    a = f32(rng, 3, 7, low=domain[0], high=domain[1])
    expected = ref(a.astype(np.float64))
    close(getattr(weft.array(a), name)(), expected)
    close(getattr(weft.op, name)(weft.array(a)), expected)


def test_clip(rng):
    a = f32(rng, 5, 5)
    close(weft.array(a).clip(-0.5, 0.25), np.clip(a, -0.5, 0.25))


def test_float64_math_is_tight(rng):
    a = rng.uniform(0.1, 3, (50,))
    x = weft.array(a)
    np.testing.assert_allclose(x.exp().asnumpy(), np.exp(a), rtol=1e-14)
    np.testing.assert_allclose((x * x + x / 3).asnumpy(), a * a + a / 3, rtol=1e-15)


# ---- reductions ------------------------------------------------------------------------------

REDUCE = [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)]


@pytest.mark.parametrize("name, ref", REDUCE)
@pytest.mark.parametrize("axis", [0, 1, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_with_axis(rng, name, ref, axis, keepdims):
    a = f32(rng, 3, 4, 5)
    got = getattr(weft.array(a), name)(axis=axis, keepdims=keepdims)
    close(got, ref(a.astype(np.float64), axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name, ref", REDUCE)
def test_reductions_over_everything(rng, name, ref):
    a = f32(rng, 4, 6)
    x = weft.array(a)
    expected = ref(a.astype(np.float64))
    # MXNet's convention: a full reduction has shape (1,).
    got = getattr(x, name)()
    assert got.shape == (1,)
    np.testing.assert_allclose(got.item(), expected, **F32)
    close(getattr(x, name)(keepdims=True), ref(a.astype(np.float64), keepdims=True))
    np.testing.assert_allclose(getattr(weft.op, name)(x).item(), expected, **F32)


def test_argmax(rng):
    a = f32(rng, 4, 7)
    x = weft.array(a)
    np.testing.assert_array_equal(x.argmax(axis=1).asnumpy(), a.argmax(axis=1))
    np.testing.assert_array_equal(x.argmax(axis=0).asnumpy(), a.argmax(axis=0))
    assert x.argmax().item() == a.argmax()


# ---- linear algebra --------------------------------------------------------------------------

@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (3, 4, 5), (17, 33, 9)])
def test_dot_and_matmul(rng, m, k, n):
    a, b = f32(rng, m, k), f32(rng, k, n)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    x, y = weft.array(a), weft.array(b)
    close(weft.op.dot(x, y), a64 @ b64)
    close(x @ y, a64 @ b64)
    close(x @ b, a64 @ b64)
    close(a @ y, a64 @ b64)
    close(weft.op.dot(weft.array(a.T.copy()), y, transpose_a=True), a64 @ b64)
    close(weft.op.dot(x, weft.array(b.T.copy()), transpose_b=True), a64 @ b64)


def test_dot_vector(rng):
    a, v = f32(rng, 4, 6), f32(rng, 6)
    close(weft.array(a) @ weft.array(v), a.astype(np.float64) @ v)


def test_batch_dot(rng):
    a, b = f32(rng, 3, 4, 5), f32(rng, 3, 5, 2)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    x, y = weft.array(a), weft.array(b)
    close(weft.op.batch_dot(x, y), a64 @ b64)
    close(x @ y, a64 @ b64)
    close(weft.op.batch_dot(x, weft.array(np.swapaxes(b, 1, 2).copy()), transpose_b=True),
          a64 @ b64)


def test_matmul_of_a_stack_and_a_matrix(rng):
    a, b, v = f32(rng, 2, 3, 4), f32(rng, 4, 5), f32(rng, 4)
    a64 = a.astype(np.float64)
    close(weft.array(a) @ weft.array(b), a64 @ b.astype(np.float64))
    close(weft.array(a) @ v, a64 @ v.astype(np.float64))


def test_matmul_shape_error():
    with pytest.raises(weft.ShapeError, match="dot"):
        weft.ones((2, 3)) @ weft.ones((2, 3))
    with pytest.raises(weft.ShapeError, match="batch_dot"):
        weft.op.batch_dot(weft.ones((2, 3, 4)), weft.ones((3, 4, 5)))


# ---- shapes ----------------------------------------------------------------------------------

def test_reshape_is_a_view(rng):
    a = f32(rng, 3, 4)
    x = weft.array(a)
    for shape in [(4, 3), (2, -1), (12,), (2, 2, 3)]:
        v = x.reshape(shape)
        assert v.shares_storage_with(x)
        close(v, a.reshape(shape))
    v = x.reshape(6, 2)
    v[0] = 100.0  # writes through the view
    expected = a.astype(np.float64).reshape(6, 2)
    expected[0] = 100
    close(x, expected.reshape(3, 4))


def test_reshape_wrong_size():
    with pytest.raises(ValueError):
        weft.ones((3, 4)).reshape(5, 2)


@pytest.mark.parametrize("shape, codes, expected", [
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (0, -2), (2, 3, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4), (2, -3), (2, 12)),
    ((6, 4), (-4, 2, 3, -2), (2, 3, 4)),
    ((6, 4), (-4, -1, 2, 0), (3, 2, 4)),
])
def test_reshape_mxnet_codes(rng, shape, codes, expected):
    a = f32(rng, *shape)
    close(weft.array(a).reshape(codes), a.reshape(expected))
    close(weft.op.Reshape(weft.array(a), shape=codes), a.reshape(expected))


def test_reshape_reverse(rng):
    a = f32(rng, 10, 5, 4)
    # MXNet: with reverse, special codes are matched from the right: (-1, 0) -> (50, 4).
    close(weft.array(a).reshape((-1, 0), reverse=True), a.reshape(50, 4))


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (0, 2, 1)])
def test_transpose(rng, axes):
    a = f32(rng, 2, 3, 4)
    x = weft.array(a)
    expected = np.transpose(a, axes)
    close(x.transpose() if axes is None else x.transpose(axes), expected)
    if axes is not None:
        close(x.transpose(*axes), expected)
        close(weft.op.transpose(x, axes=axes), expected)
    close(x.T, a.T)


def test_expand_dims_squeeze_flatten(rng):
    a = f32(rng, 3, 1, 4)
    x = weft.array(a)
    close(x.expand_dims(0), a[None])
    close(x.squeeze(), a.squeeze())
    close(x.squeeze(axis=1), a.squeeze(1))
    close(x.flatten(), a.reshape(3, 4))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concat_and_stack(rng, axis):
    parts = [f32(rng, 2, 3, 4) for _ in range(3)]
    arrays = [weft.array(p) for p in parts]
    close(weft.concat(arrays, axis=axis), np.concatenate(parts, axis=axis))
    close(weft.stack(arrays, axis=axis), np.stack(parts, axis=axis))
    close(weft.op.Concat(*arrays, dim=axis), np.concatenate(parts, axis=axis))
    close(weft.op.stack(*arrays, axis=axis), np.stack(parts, axis=axis))


def test_concat_unequal_sizes(rng):
    a, b = f32(rng, 2, 3), f32(rng, 5, 3)
    close(weft.concat([weft.array(a), weft.array(b)]), np.concatenate([a, b]))
    with pytest.raises(weft.ShapeError):
        weft.concat([weft.array(a), weft.array(b)], axis=1)


def test_add_n(rng):
    parts = [f32(rng, 3, 2) for _ in range(4)]
    close(weft.op.add_n(*[weft.array(p) for p in parts]), np.sum(parts, axis=0, dtype=np.float64))


# ---- indexing --------------------------------------------------------------------------------

def test_views_share_storage(rng):
    a = f32(rng, 5, 4, 3)
    x = weft.array(a)
    for key in [2, -1, slice(1, 4), (1, slice(0, 2)), (3, 2), (-2, slice(1, None))]:
        v = x[key]
        assert v.shares_storage_with(x), key
        close(v, a[key])


@pytest.mark.parametrize("key", [
    (slice(None), 1), (slice(None, None, 2),), (Ellipsis, 0), (slice(1, 4), slice(None), 2),
    (None, 1), (slice(None), None, 1), (slice(4, 0, -1),), (slice(None), slice(-2, None)),
    (1, slice(None), slice(0, 3, 2)), (slice(10, 20),), (Ellipsis,),
])
def test_basic_indexing_copies(rng, key):
    a = f32(rng, 5, 4, 3)
    x = weft.array(a)
    close(x[key], a[key])


def test_bool_index_is_refused():
    with pytest.raises(IndexError, match="bool"):
        weft.ones((2, 2))[True]
    with pytest.raises(IndexError, match="float"):
        weft.ones((2, 2))[1.0]


def test_index_out_of_bounds():
    x = weft.ones((3, 4))
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]
    with pytest.raises(IndexError):
        x[1, 4]
    with pytest.raises(IndexError):
        x[1, 2, 0]


def test_setitem_through_views(rng):
    a = f32(rng, 4, 5)
    x = weft.array(a)
    e = a.astype(np.float64)
    x[1] = 7.5
    e[1] = 7.5
    x[2:4] = f32(rng, 5)
    e[2:4] = x[2].asnumpy()
    x[0, 1:3] = weft.array([-1.0, -2.0])
    e[0, 1:3] = [-1, -2]
    x[3, 4] = 9
    e[3, 4] = 9
    close(x, e)
    row = x[2]
    row[:] = 0
    e[2] = 0
    close(x, e)
    x[:] = [1, 2, 3, 4, 5]  # broadcast to every row
    close(x, np.broadcast_to(np.arange(1.0, 6.0), (4, 5)))


def test_setitem_converts_dtype():
    x = weft.zeros((2, 3), dtype="int32")
    x[1] = weft.array([1.9, 2.0, 3.0])
    np.testing.assert_array_equal(x.asnumpy(), [[0, 0, 0], [1, 2, 3]])


def test_setitem_outside_views_is_refused():
    x = weft.zeros((3, 4))
    with pytest.raises(IndexError, match="views"):
        x[:, 1] = 2.0
    np.testing.assert_array_equal(x.asnumpy(), np.zeros((3, 4)))


def test_iteration(rng):
    a = f32(rng, 3, 2)
    rows = list(weft.array(a))
    assert len(rows) == 3
    for r, e in zip(rows, a):
        close(r, e)


# ---- astype ----------------------------------------------------------------------------------

def test_astype_values(rng):
    a = f32(rng, 10) * 10
    np.testing.assert_array_equal(weft.array(a).astype(np.int32).asnumpy(), a.astype(np.int32))
    np.testing.assert_array_equal(weft.array(a).astype(np.float64).asnumpy(),
                                  a.astype(np.float64))


# ---- neural network operators ----------------------------------------------------------------

def conv2d_ref(x, w, b, stride=(1, 1), pad=(0, 0), dilate=(1, 1), groups=1):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    eh, ew = dilate[0] * (kh - 1) + 1, dilate[1] * (kw - 1) + 1
    oh, ow = (h - eh) // stride[0] + 1, (wd - ew) // stride[1] + 1
    out = np.zeros((n, f, oh, ow))
    fg = f // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilate[0]:i * dilate[0] + stride[0] * (oh - 1) + 1:stride[0],
                           j * dilate[1]:j * dilate[1] + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * fg:(g + 1) * fg] += np.einsum(
                    "nchw,fc->nfhw", patch, w[g * fg:(g + 1) * fg, :, i, j].astype(np.float64))
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return out


@pytest.mark.parametrize("stride, pad, dilate, groups", [
    ((1, 1), (0, 0), (1, 1), 1), ((2, 2), (1, 1), (1, 1), 1), ((1, 2), (2, 1), (2, 1), 1),
    ((1, 1), (1, 1), (1, 1), 2), ((1, 1), (1, 1), (1, 1), 4),
])
def test_convolution(rng, stride, pad, dilate, groups):
    x = f32(rng, 2, 4, 9, 8)
    w = f32(rng, 8, 4 // groups, 3, 3)
    b = f32(rng, 8)
    y = weft.op.Convolution(weft.array(x), weft.array(w), weft.array(b), kernel=(3, 3),
                            num_filter=8, stride=stride, pad=pad, dilate=dilate, num_group=groups)
    close(y, conv2d_ref(x, w, b, stride, pad, dilate, groups), rtol=1e-4, atol=1e-5)


def test_convolution_no_bias_by_name(rng):
    x, w = f32(rng, 1, 3, 6, 6), f32(rng, 2, 3, 3, 3)
    y = weft.op.Convolution(data=weft.array(x), weight=weft.array(w), kernel=(3, 3),
                            num_filter=2, no_bias=True)
    close(y, conv2d_ref(x, w, None), rtol=1e-4, atol=1e-5)


def pool_ref(x, kernel, stride, kind, pad=(0, 0)):
    fill = -np.inf if kind == "max" else 0.0
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])),
               constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(x, kernel, axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1]]
    return win.max(axis=(-2, -1)) if kind == "max" else win.mean(axis=(-2, -1))


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kernel, stride", [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((3, 2), (2, 1))])
def test_pooling(rng, kind, kernel, stride):
    x = f32(rng, 2, 3, 7, 8)
    y = weft.op.Pooling(weft.array(x), kernel=kernel, pool_type=kind, stride=stride)
    close(y, pool_ref(x, kernel, stride, kind))


def test_max_pooling_with_padding(rng):
    x = f32(rng, 1, 2, 6, 6)
    y = weft.op.Pooling(weft.array(x), kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                        pool_type="max")
    close(y, pool_ref(x, (3, 3), (2, 2), "max", (1, 1)))


def test_global_pooling(rng):
    x = f32(rng, 2, 3, 5, 4)
    y = weft.op.Pooling(weft.array(x), kernel=(1, 1), global_pool=True, pool_type="avg")
    close(y, x.astype(np.float64).mean(axis=(2, 3), keepdims=True))


@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected(rng, flatten):
    x, w, b = f32(rng, 4, 3, 5), f32(rng, 6, 15 if flatten else 5), f32(rng, 6)
    y = weft.op.FullyConnected(weft.array(x), weft.array(w), weft.array(b), num_hidden=6,
                               flatten=flatten)
    x64 = x.astype(np.float64).reshape(4, 15) if flatten else x.astype(np.float64)
    close(y, x64 @ w.astype(np.float64).T + b, rtol=1e-5, atol=1e-5)


def test_fully_connected_no_bias(rng):
    x, w = f32(rng, 4, 5), f32(rng, 3, 5)
    y = weft.op.FullyConnected(weft.array(x), weft.array(w), num_hidden=3, no_bias=True)
    close(y, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)


def softmax_ref(a, axis, t=1.0):
    a = a.astype(np.float64) / t
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(rng, axis):
    a = f32(rng, 3, 4, 5) * 3
    x = weft.array(a)
    close(weft.op.softmax(x, axis=axis), softmax_ref(a, axis))
    close(weft.op.log_softmax(x, axis=axis), np.log(softmax_ref(a, axis)), rtol=1e-5, atol=1e-5)
    close(x.softmax(axis=axis), softmax_ref(a, axis))
    close(x.log_softmax(axis=axis), np.log(softmax_ref(a, axis)), rtol=1e-5, atol=1e-5)


def test_softmax_temperature(rng):
    a = f32(rng, 2, 6)
    close(weft.op.softmax(weft.array(a), axis=1, temperature=2.0), softmax_ref(a, 1, 2.0))


def test_activation_keyword(rng):
    a = f32(rng, 3, 4)
    close(weft.op.Activation(weft.array(a), act_type="tanh"), np.tanh(a.astype(np.float64)))
    close(weft.op.Activation(weft.array(a), act_type="relu"), np.maximum(a, 0))


def test_numpy_scalars_as_attributes(rng):
    a = f32(rng, 3, 4)
    x = weft.array(a)
    close(x.clip(np.float32(-0.5), np.float32(0.5)), np.clip(a, -0.5, 0.5))
    close(x.sum(axis=np.int64(1)), a.astype(np.float64).sum(axis=1))
    w = f32(rng, 2, 4)
    close(weft.op.FullyConnected(x, weft.array(w), num_hidden=np.int64(2), no_bias=np.bool_(True)),
          a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    shape = np.array([2, 2])
    y = weft.op.Pooling(weft.array(f32(rng, 1, 1, 4, 4)), kernel=tuple(shape), stride=tuple(shape))
    assert y.shape == (1, 1, 2, 2)
    # dtypes stay dtypes.
    assert weft.op.Cast(x, dtype=np.float64).dtype == np.float64
    assert weft.op.Cast(x, dtype=np.dtype("int32")).dtype == np.int32


def test_op_out_argument(rng):
    a, b = f32(rng, 3, 3), f32(rng, 3, 3)
    out = weft.zeros((3, 3))
    r = weft.op.elemwise_add(weft.array(a), weft.array(b), out=out)
    assert r is out
    close(out, a.astype(np.float64) + b)


def test_op_inputs_from_numpy_and_lists(rng):
    a = f32(rng, 2, 3)
    close(weft.op.broadcast_add(weft.array(a), [1.0, 2.0, 3.0]), a + np.array([1.0, 2.0, 3.0]))


# ---- weft.op: schemas, docs and errors -------------------------------------------------------

def test_op_signature_carries_the_schema():
    sig = inspect.signature(weft.op.Convolution)
    params = sig.parameters
    assert list(params)[:3] == ["data", "weight", "bias"]
    assert params["kernel"].default is inspect.Parameter.empty
    assert params["kernel"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["num_filter"].default is inspect.Parameter.empty
    assert params["num_group"].default == 1
    assert params["no_bias"].default is False
    assert params["out"].default is None
    pool = inspect.signature(weft.op.Pooling).parameters
    assert pool["pool_type"].default == "max"
    assert pool["global_pool"].default is False
    assert inspect.signature(weft.op.softmax).parameters["axis"].default == -1
    concat = inspect.signature(weft.op.Concat).parameters
    assert concat["data"].kind is inspect.Parameter.VAR_POSITIONAL
    assert concat["dim"].default == 1


def test_op_docstring():
    doc = weft.op.Convolution.__doc__
    assert "Inputs:" in doc and "weight" in doc
    assert "kernel" in doc and "required" in doc
    assert "num_group (int, default 1)" in doc
    assert weft.op.Convolution.__name__ == "Convolution"
    assert "num_hidden" in weft.op.FullyConnected.__doc__


def test_op_listing():
    names = weft.op.list()
    assert "Convolution" in names and "softmax" in names
    d = weft.op.describe("FullyConnected")
    assert d["inputs"] == ["data", "weight", "bias"]
    assert any(p["name"] == "num_hidden" and p["required"] for p in d["params"])


def test_unknown_attribute_names_op_and_attribute(rng):
    x = weft.array(f32(rng, 1, 1, 4, 4))
    w = weft.array(f32(rng, 1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"Convolution.*unknown attribute 'bogus'"):
        weft.op.Convolution(x, w, kernel=(3, 3), num_filter=1, no_bias=True, bogus=1)
    with pytest.raises(ValueError, match=r"softmax.*'axes'"):
        weft.op.softmax(x, axes=1)


def test_missing_required_attribute(rng):
    x = weft.array(f32(rng, 1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"Convolution.*'kernel'"):
        weft.op.Convolution(x, x, num_filter=1, no_bias=True)


def test_bad_attribute_value():
    with pytest.raises(ValueError, match=r"Pooling.*pool_type"):
        weft.op.Pooling(weft.ones((1, 1, 4, 4)), kernel=(2, 2), pool_type="median")


def test_unknown_operator():
    with pytest.raises(AttributeError, match="no_such_op"):
        weft.op.no_such_op


def test_too_many_inputs():
    with pytest.raises(TypeError, match="relu"):
        weft.op.relu(weft.ones(2), weft.ones(2))


def test_wrong_shapes_raise_shape_error(rng):
    with pytest.raises(weft.ShapeError, match="FullyConnected"):
        weft.op.FullyConnected(weft.ones((4, 5)), weft.ones((3, 6)), weft.ones(3), num_hidden=3)
    with pytest.raises(weft.ShapeError):
        weft.ones((2, 3)) + weft.ones((3, 2))
    with pytest.raises(weft.ShapeError):
        weft.op.elemwise_mul(weft.ones((2, 3)), weft.ones((2, 4)))
    with pytest.raises(weft.ShapeError, match="Convolution"):
        weft.op.Convolution(weft.ones((1, 3, 5, 5)), weft.ones((2, 4, 3, 3)), kernel=(3, 3),
                            num_filter=2, no_bias=True)
    assert issubclass(weft.ShapeError, ValueError)
