"""weft.register_op: operators computed by Python functions, run by the engine like any other."""
import math
import threading

import numpy as np
import pytest

import weft

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu_ref(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_grad_ref(x):
    x = np.asarray(x, dtype=np.float64)
    cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


def _gelu_backward(out_grads, inputs, outputs):
    return [out_grads[0] * _gelu_grad_ref(inputs[0])]


@weft.register_op("t_reg_gelu", backward=_gelu_backward, description="GELU in NumPy")
def _gelu(x):
    return _gelu_ref(x)


# ---- forward ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7,), (64, 96)])  # inline on the caller / on a worker
def test_gelu_matches_numpy(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32) * 3
    y = weft.op.t_reg_gelu(weft.array(a))
    assert y.shape == shape and y.dtype == np.float32
    np.testing.assert_allclose(y.asnumpy(), _gelu_ref(a), rtol=1e-6, atol=1e-7)


def test_register_returns_the_op_function_and_describes_it(rng):
    assert _gelu is weft.op.t_reg_gelu
    d = weft.op.describe("t_reg_gelu")
    assert d["description"] == "GELU in NumPy"
    assert d["inputs"] == ["data"] and d["outputs"] == ["output"]
    assert d["has_gradient"] and d["cpu"]
    assert "t_reg_gelu" in weft.op.list() and "_backward_t_reg_gelu" in weft.op.list()
    # Invoking by name (the registry path every front end uses).
    a = rng.standard_normal((3, 4)).astype(np.float64)
    (y,) = weft._weft._invoke("t_reg_gelu", [weft.array(a, dtype=np.float64)])
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.asnumpy(), _gelu_ref(a), rtol=1e-13, atol=1e-15)


def test_inputs_are_read_only_views_and_outputs_writable_in_out_mode(rng):
    seen = {}

    def fwd(inputs, outputs, shift):
        seen["in_writeable"] = inputs[0].flags.writeable
        seen["out_writeable"] = outputs[0].flags.writeable
        np.add(inputs[0], shift, out=outputs[0])
        np.multiply(inputs[0], inputs[1], out=outputs[1])

    weft.register_op("t_reg_outmode", fwd, num_inputs=2, num_outputs=2, params={"shift": 0.5},
                     writes_outputs=True)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    s, p = weft.op.t_reg_outmode(weft.array(a), weft.array(b), shift=1.25)
    np.testing.assert_array_equal(s.asnumpy(), a + np.float32(1.25))
    np.testing.assert_array_equal(p.asnumpy(), a * b)
    assert seen == {"in_writeable": False, "out_writeable": True}


# ---- backward ---------------------------------------------------------------------------------

def test_gelu_backward_matches_central_differences(rng):
    a = rng.standard_normal(24) * 2
    w = rng.standard_normal(24)
    x = weft.array(a, dtype=np.float64)
    x.attach_grad()
    with weft.autograd.record():
        y = weft.op.t_reg_gelu(x)
    y.backward(weft.array(w, dtype=np.float64))
    grad = x.grad.asnumpy()

    def loss(values):  # sum(w * gelu(values)), computed by the operator itself
        out = weft.op.t_reg_gelu(weft.array(values, dtype=np.float64)).asnumpy()
        return float(np.dot(w, out))

    eps = 1e-6
    fd = np.empty_like(a)
    for i in range(a.size):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        fd[i] = (loss(hi) - loss(lo)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad, w * _gelu_grad_ref(a), rtol=1e-12, atol=1e-14)


def test_two_input_backward_with_params_and_no_gradient(rng):
    def bwd(out_grads, inputs, outputs, alpha):
        x, y = inputs
        return [out_grads[0] * alpha * y, None]  # no gradient for y: zeros

    weft.register_op("t_reg_mul", lambda x, y, alpha: alpha * x * y, num_inputs=2,
                     input_names=["lhs", "rhs"], params={"alpha": 1.0}, backward=bwd)
    a = rng.standard_normal((4, 3))
    b = rng.standard_normal((4, 3))
    x, y = weft.array(a, dtype=np.float64), weft.array(b, dtype=np.float64)
    x.attach_grad()
    y.attach_grad()
    with weft.autograd.record():
        z = weft.op.t_reg_mul(x, rhs=y, alpha=3.0)
    np.testing.assert_allclose(z.asnumpy(), 3.0 * a * b, rtol=1e-15)
    z.backward(weft.ones((4, 3), dtype=np.float64))
    np.testing.assert_allclose(x.grad.asnumpy(), 3.0 * b, rtol=1e-15)
    np.testing.assert_array_equal(y.grad.asnumpy(), np.zeros((4, 3)))


# ---- parameters -------------------------------------------------------------------------------

_seen_params = []


@weft.register_op("t_reg_params", params={"factor": 2.0, "offset": 0, "flip": False,
                                          "axes": (0,), "mode": "plain"})
def _params_op(x, factor, offset, flip, axes, mode):
    _seen_params.append((factor, offset, flip, axes, mode))
    out = x * factor + offset
    if flip:
        out = np.flip(out, axis=axes)
    return out if mode == "plain" else -out


def test_params_defaults_and_values(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = weft.array(a)
    del _seen_params[:]
    np.testing.assert_array_equal(weft.op.t_reg_params(x).asnumpy(), a * np.float32(2.0))
    assert _seen_params[-1] == (2.0, 0, False, (0,), "plain")
    assert [type(v) for v in _seen_params[-1]] == [float, int, bool, tuple, str]
    y = weft.op.t_reg_params(x, factor=0.5, offset=3, flip=True, axes=(1,), mode="neg")
    np.testing.assert_array_equal(y.asnumpy(), -np.flip(a * np.float32(0.5) + 3, axis=1))
    assert _seen_params[-1] == (0.5, 3, True, (1,), "neg")
    doc = weft.op.t_reg_params.__doc__
    assert "factor (float, default 2.0)" in doc and "axes (Shape(tuple), default (0,))" in doc


@pytest.mark.parametrize("kwargs, words", [
    ({"offset": 1.5}, ["t_reg_params", "offset", "1.5"]),
    ({"flip": "maybe"}, ["t_reg_params", "flip", "maybe"]),
    ({"axes": "x"}, ["t_reg_params", "axes"]),
    ({"factor": "fast"}, ["t_reg_params", "factor"]),
    ({"scale": 2.0}, ["t_reg_params", "unknown attribute 'scale'", "factor"]),
])
def test_bad_params_raise_value_error(kwargs, words):
    with pytest.raises(ValueError) as info:
        weft.op.t_reg_params(weft.ones((2, 2)), **kwargs)
    for w in words:
        assert w in str(info.value)


def test_required_param():
    weft.register_op("t_reg_required", lambda x, k: x * k, params={"k": int})
    with pytest.raises(ValueError, match="required attribute 'k'"):
        weft.op.t_reg_required(weft.ones((2,)))
    np.testing.assert_array_equal(weft.op.t_reg_required(weft.ones((2,)), k=4).asnumpy(),
                                  [4.0, 4.0])


# ---- inference --------------------------------------------------------------------------------

def test_custom_infer_shape_and_type(rng):
    weft.register_op("t_reg_rowsum", lambda x, keepdims: x.sum(axis=1, keepdims=keepdims),
                     params={"keepdims": False},
                     infer_shape=lambda s, keepdims: [(s[0], 1) if keepdims else (s[0],)])
    a = rng.standard_normal((6, 50)).astype(np.float32)
    y = weft.op.t_reg_rowsum(weft.array(a))
    assert y.shape == (6,)  # known before the kernel runs
    np.testing.assert_allclose(y.asnumpy(), a.astype(np.float64).sum(axis=1), rtol=1e-5,
                               atol=1e-5)
    assert weft.op.t_reg_rowsum(weft.array(a), keepdims=True).shape == (6, 1)

    weft.register_op("t_reg_isneg", lambda x: x < 0, infer_type=lambda t: np.bool_)
    b = weft.op.t_reg_isneg(weft.array(a))
    assert b.dtype == np.bool_
    np.testing.assert_array_equal(b.asnumpy(), a < 0)


def test_infer_shape_errors_raise_at_the_call():
    def bad_infer(s):
        raise KeyError("no such axis")

    weft.register_op("t_reg_badinfer", lambda x: x, infer_shape=bad_infer)
    with pytest.raises(KeyError, match="t_reg_badinfer"):
        weft.op.t_reg_badinfer(weft.ones((2,)))
    weft.register_op("t_reg_badinfer2", lambda x: x, infer_shape=lambda s: [(1,), (2,)])
    with pytest.raises(weft.ShapeError, match="2 shapes; the op has 1 outputs"):
        weft.op.t_reg_badinfer2(weft.ones((2,)))


# ---- errors -----------------------------------------------------------------------------------

def _divide_by_zero(x):
    return x + 1 // 0


weft.register_op("t_reg_div0", _divide_by_zero)


@pytest.mark.parametrize("shape", [(3,), (100, 100)])  # inline on the caller / on a worker
def test_python_exception_surfaces_once_as_its_type(shape):
    y = weft.op.t_reg_div0(weft.ones(shape))
    z = y + 1  # skipped: carries the same error
    with pytest.raises(ZeroDivisionError) as info:
        y.asnumpy()
    message = str(info.value)
    assert message.startswith("op 't_reg_div0': ZeroDivisionError: ")
    assert "_divide_by_zero" in message and "1 // 0" in message  # the traceback's last lines
    y.wait_to_read()  # delivered once
    with pytest.raises(ZeroDivisionError):
        z.wait_to_read()
    with pytest.raises(weft.EngineError, match="t_reg_div0"):  # waitall reports it once too
        weft.waitall()
    weft.waitall()
    # The engine is usable afterwards.
    np.testing.assert_allclose(weft.op.t_reg_gelu(weft.ones(shape)).asnumpy(),
                               np.full(shape, _gelu_ref(1.0)), rtol=1e-6)


def test_wrong_return_shape_dtype_and_count():
    weft.register_op("t_reg_short", lambda x: x[:-1])
    with pytest.raises(weft.ShapeError, match=r"op 't_reg_short': forward returned an array of "
                                              r"shape \(3,\) for output 0 \('output'\), which "
                                              r"has shape \(4,\)"):
        weft.op.t_reg_short(weft.ones((4,))).asnumpy()
    weft.register_op("t_reg_complex", lambda x: x * 1j)
    with pytest.raises(weft.ShapeError, match="dtype complex64 for output 0"):
        weft.op.t_reg_complex(weft.ones((4,))).asnumpy()
    weft.register_op("t_reg_count", lambda x: x, num_outputs=2)
    with pytest.raises(ValueError, match="forward returned 1 values; one per output"):
        weft.op.t_reg_count(weft.ones((4,)))[0].asnumpy()
    with pytest.raises(weft.EngineError):
        weft.waitall()


_kept = []


def test_keeping_a_view_fails_the_operation():
    def keep(x):
        _kept.append(x[1:])  # a view derived from the input's view
        return x

    weft.register_op("t_reg_keep", keep)
    with pytest.raises(weft.WeftError, match="op .t_reg_keep.: forward kept a reference to the NumPy view of input 0"):
        weft.op.t_reg_keep(weft.ones((4,))).asnumpy()
    del _kept[:]
    with pytest.raises(weft.EngineError):
        weft.waitall()


def test_taken_names_and_bad_definitions():
    with pytest.raises(ValueError, match="'relu'.*already registered"):
        weft.register_op("relu", lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        weft.register_op("t_reg_gelu", lambda x: x)
    with pytest.raises(ValueError, match="parameter 'p'"):
        weft.register_op("t_reg_bad1", lambda x: x, params={"p": None})
    with pytest.raises(ValueError, match="'out' is taken"):
        weft.register_op("t_reg_bad2", lambda x: x, params={"out": 1})
    with pytest.raises(ValueError, match="num_outputs"):
        weft.register_op("t_reg_bad3", lambda x: x, num_outputs=0)
    with pytest.raises(ValueError, match="without inputs needs infer_shape"):
        weft.register_op("t_reg_bad4", lambda: 0, num_inputs=0)
    with pytest.raises(TypeError, match="backward must be callable"):
        weft.register_op("t_reg_bad5", lambda x: x, backward=1)
    for n in ("t_reg_bad1", "t_reg_bad2", "t_reg_bad3", "t_reg_bad4", "t_reg_bad5"):
        assert n not in weft.op.list()


# ---- threads and graphs -----------------------------------------------------------------------

def test_ops_from_eight_threads(rng):
    weft.register_op("t_reg_affine", lambda x, a, b: a * x + b, params={"a": 1.0, "b": 0.0})
    data = [rng.standard_normal((40, 30)).astype(np.float32) for _ in range(8)]
    errors = []
    barrier = threading.Barrier(8)

    def work(t):
        try:
            barrier.wait()
            for i in range(15):
                x = weft.array(data[t])
                y = weft.op.t_reg_affine(x, a=float(t + 1), b=float(i))
                y = weft.op.t_reg_gelu(y) if i % 3 == 0 else y
                want = data[t] * np.float32(t + 1) + np.float32(i)
                want = _gelu_ref(want) if i % 3 == 0 else want
                np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-6, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread did not finish (deadlock?)"
    assert not errors, errors[0]


def test_python_op_in_a_json_graph_with_gradient(rng):
    weft.register_op("t_reg_cube", lambda x, c: c * x ** 3, params={"c": 1.0},
                     backward=lambda og, xs, ys, c: [og[0] * 3 * c * xs[0] ** 2])
    x = weft.sym.Variable("x", dtype="float64")
    y = weft.sym.t_reg_cube(x, c=2.0, name="cube")
    net = weft.graph.load_json(y.tojson())
    assert '"op": "t_reg_cube"' in net.tojson()
    a = rng.standard_normal((3, 5)).astype(np.float64)
    ex = net.bind(args={"x": weft.array(a, dtype=np.float64)}, grad_req="write")
    out = ex.forward(is_train=True)[0]
    np.testing.assert_allclose(out.asnumpy(), 2.0 * a ** 3, rtol=1e-14)
    g = rng.standard_normal((3, 5))
    ex.backward(weft.array(g, dtype=np.float64))
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), g * 6.0 * a ** 2, rtol=1e-14)
