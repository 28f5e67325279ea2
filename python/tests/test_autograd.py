"""weft.autograd: gradients against central finite differences of float64 NumPy references,
the recording and training flags, grad_req, autograd.grad, retain_graph and in-place rules."""
import numpy as np
import pytest

import weft
from weft import autograd as ag

TOL = dict(rtol=1e-6, atol=1e-8)


def numeric_grads(f, arrays, eps=1e-6):
    """Central differences of the scalar f(*arrays) (float64 NumPy) for every array."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            old = a[i]
            a[i] = old + eps
            hi = f(*arrays)
            a[i] = old - eps
            lo = f(*arrays)
            a[i] = old
            g[i] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def check_gradients(weft_fn, numpy_fn, arrays, tol=TOL):
    """Gradients of sum(weft_fn(...) * w) (w random, so that no symmetry hides an error) against
    finite differences of the same composition in NumPy."""
    rng = np.random.default_rng(99)
    out_shape = np.shape(numpy_fn(*arrays))
    w = rng.standard_normal(out_shape)
    xs = [weft.array(a) for a in arrays]
    for x in xs:
        x.attach_grad()
    with ag.record():
        y = weft_fn(*xs)
        loss = (y * weft.array(w)).sum()
    loss.backward()
    expected = numeric_grads(lambda *a: float(np.sum(numpy_fn(*a) * w)),
                             [a.copy() for a in arrays])
    for i, (x, e) in enumerate(zip(xs, expected)):
        assert x.grad is not None, f"input {i} got no gradient"
        np.testing.assert_allclose(x.grad.asnumpy(), e, err_msg=f"input {i}", **tol)
    np.testing.assert_allclose(y.asnumpy(), numpy_fn(*arrays), rtol=1e-12, atol=1e-12)


def test_mul_add_sin(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_gradients(lambda x, y: x * y + x.sin(), lambda x, y: x * y + np.sin(x), [a, b])


def test_unary_chain(rng):
    a = rng.uniform(0.5, 2.0, (2, 5))
    check_gradients(lambda x: (x.log() * x.exp()).tanh() / x.sqrt() + x.sigmoid() ** 2,
                    lambda x: np.tanh(np.log(x) * np.exp(x)) / np.sqrt(x)
                    + (1 / (1 + np.exp(-x))) ** 2, [a])


def test_scalars_both_sides(rng):
    a = rng.uniform(0.5, 2.0, (4,))
    check_gradients(lambda x: (3.0 - x) * (2.0 / x) + x ** 3 - 2 ** x,
                    lambda x: (3.0 - x) * (2.0 / x) + x ** 3 - 2 ** x, [a])


@pytest.mark.parametrize("sa, sb", [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
                                    ((5,), ())])
def test_broadcasting(rng, sa, sb):
    a, b = rng.standard_normal(sa), rng.uniform(0.5, 2.0, sb)
    check_gradients(lambda x, y: (x + y) * x / y - y,
                    lambda x, y: (x + y) * x / y - y, [a, b])


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 2), False)])
def test_reductions(rng, axis, keepdims):
    a = rng.standard_normal((3, 4, 2))
    check_gradients(lambda x: x.sum(axis=axis, keepdims=keepdims) ** 2
                    + x.mean(axis=axis, keepdims=keepdims),
                    lambda x: (np.sum(x, axis=axis, keepdims=keepdims) ** 2
                               + np.mean(x, axis=axis, keepdims=keepdims)).reshape(
                        (1,) if axis is None and not keepdims else
                        np.sum(x, axis=axis, keepdims=keepdims).shape), [a])


def test_max_reduction(rng):
    a = rng.permutation(20).reshape(4, 5).astype(np.float64)  # distinct: one max per row
    check_gradients(lambda x: x.max(axis=1), lambda x: x.max(axis=1), [a])


def test_fully_connected_relu_log_softmax(rng):
    x, w, b = rng.standard_normal((4, 6)), rng.standard_normal((5, 6)), rng.standard_normal(5)

    def weft_fn(x, w, b):
        h = weft.op.FullyConnected(x, w, b, num_hidden=5).relu()
        return weft.op.log_softmax(h, axis=-1)

    def numpy_fn(x, w, b):
        h = np.maximum(x @ w.T + b, 0)
        z = h - h.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    check_gradients(weft_fn, numpy_fn, [x, w, b], tol=dict(rtol=1e-5, atol=1e-7))


def test_dot_and_batch_dot(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    check_gradients(lambda x, y: x @ y, lambda x, y: x @ y, [a, b])
    c, d = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 2))
    check_gradients(lambda x, y: weft.op.batch_dot(x, y), lambda x, y: x @ y, [c, d])


def test_convolution_and_pooling(rng):
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))

    def weft_fn(x, w):
        y = weft.op.Convolution(x, w, kernel=(3, 3), num_filter=3, pad=(1, 1), no_bias=True)
        return weft.op.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="avg")

    def numpy_fn(x, w):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        y = np.einsum("nchwij,fcij->nfhw", win, w)
        return y[:, :, :4, :4].reshape(1, 3, 2, 2, 2, 2).mean(axis=(3, 5))

    check_gradients(weft_fn, numpy_fn, [x, w])


def test_softmax_transpose_concat(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def numpy_fn(x, y):
        c = np.concatenate([x, y * 2], axis=0).T
        e = np.exp(c - c.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    check_gradients(lambda x, y: weft.op.softmax(weft.concat([x, y * 2], axis=0).T, axis=1),
                    numpy_fn, [a, b])


def test_gradients_through_views(rng):
    # x[i], x[a:b], x[i, a:b] and reshape are views; recorded, gradients flow through them.
    a = rng.standard_normal((4, 3))

    def weft_fn(x):
        return weft.stack([x[1] * 2, x[2:4].sum(axis=0), x.reshape(3, 4)[0, 1:4],
                           x[-1].sin(), x.reshape(-1)[3:6]])

    def numpy_fn(x):
        return np.stack([x[1] * 2, x[2:4].sum(axis=0), x.reshape(3, 4)[0, 1:4], np.sin(x[-1]),
                         x.reshape(-1)[3:6]])

    check_gradients(weft_fn, numpy_fn, [a])


def test_gradients_through_copies_and_general_indexing(rng):
    a = rng.standard_normal((3, 4))
    check_gradients(lambda x: x.copy()[:, 1:3] * x[::2].sum(),
                    lambda x: x.copy()[:, 1:3] * x[::2].sum(), [a])


def test_float32_gradient(rng):
    a = rng.standard_normal((3, 3)).astype(np.float32)
    x = weft.array(a)
    x.attach_grad()
    with ag.record():
        y = (x * x * x).sum()
    y.backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * a.astype(np.float64) ** 2, rtol=1e-6)


# ---- flags -----------------------------------------------------------------------------------

def test_flags_default_off():
    assert not ag.is_recording()
    assert not ag.is_training()


def test_record_pause_and_modes():
    with ag.record():
        assert ag.is_recording() and ag.is_training()
        with ag.pause():
            assert not ag.is_recording() and not ag.is_training()
            with ag.train_mode():
                assert not ag.is_recording() and ag.is_training()
            assert not ag.is_training()
        with ag.pause(train_mode=True):
            assert not ag.is_recording() and ag.is_training()
        with ag.predict_mode():
            assert ag.is_recording() and not ag.is_training()
        assert ag.is_recording() and ag.is_training()
    assert not ag.is_recording() and not ag.is_training()
    with ag.record(train_mode=False):
        assert ag.is_recording() and not ag.is_training()
    with ag.train_mode():
        assert ag.is_training() and not ag.is_recording()
        with ag.predict_mode():
            assert not ag.is_training()
    assert not ag.is_training()


def test_flags_restored_after_an_exception():
    with pytest.raises(RuntimeError):
        with ag.record():
            raise RuntimeError("boom")
    assert not ag.is_recording() and not ag.is_training()


def test_set_flags_return_previous():
    assert ag.set_recording(True) is False
    assert ag.set_recording(False) is True
    assert ag.set_training(True) is False
    assert ag.set_training(False) is True


def test_pause_stops_recording(rng):
    a = rng.standard_normal(5)
    x = weft.array(a)
    x.attach_grad()
    with ag.record():
        y = x * 3
        with ag.pause():
            z = x * x  # not recorded: a constant for backward
        out = (y + z).sum()
    assert not z.requires_grad
    out.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.full(5, 3.0))


def test_dropout_modes():
    x = weft.ones((4000,), dtype="float64")
    # Predict mode (the default outside record, and record(train_mode=False)): the identity.
    np.testing.assert_array_equal(weft.op.Dropout(x, p=0.5).asnumpy(), np.ones(4000))
    with ag.record(train_mode=False):
        np.testing.assert_array_equal(weft.op.Dropout(x, p=0.5).asnumpy(), np.ones(4000))
    with ag.record():
        with ag.predict_mode():
            np.testing.assert_array_equal(weft.op.Dropout(x, p=0.5).asnumpy(), np.ones(4000))
    # Training mode: each value dropped (0) or kept and scaled by 1 / (1 - p).
    weft.seed(5)
    with ag.train_mode():
        y = weft.op.Dropout(x, p=0.5).asnumpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert abs(np.mean(y == 0) - 0.5) < 0.05


def test_dropout_gradient_uses_the_mask():
    x = weft.ones((200,), dtype="float64")
    x.attach_grad()
    with ag.record():
        y = weft.op.Dropout(x, p=0.5)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), y.asnumpy())


# ---- grad_req, backward and grad ---------------------------------------------------------------

def test_nothing_recorded_outside_record(rng):
    x = weft.array(rng.standard_normal(3))
    x.attach_grad()
    y = (x * 2).sum()
    assert not y.requires_grad
    with pytest.raises(ValueError):
        y.backward()


def test_grad_req_write_overwrites():
    x = weft.array([1.0, 2.0, 3.0])
    x.attach_grad()
    assert x.requires_grad
    np.testing.assert_array_equal(x.grad.asnumpy(), [0, 0, 0])
    for k in (1.0, 2.0):
        with ag.record():
            y = (x * k).sum()
        y.backward()
        np.testing.assert_array_equal(x.grad.asnumpy(), [k, k, k])


def test_grad_req_add_accumulates():
    x = weft.array([1.0, 2.0, 3.0])
    x.attach_grad("add")
    for _ in range(3):
        with ag.record():
            y = (x * x).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * 2 * np.array([1.0, 2.0, 3.0]))


def test_grad_req_null_and_bad():
    x = weft.array([1.0])
    x.attach_grad("null")
    assert x.grad is None and not x.requires_grad
    with pytest.raises(ValueError, match="grad_req"):
        x.attach_grad("sometimes")


def test_no_grad_before_attach():
    assert weft.array([1.0]).grad is None


def test_head_gradient(rng):
    a, g = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    x = weft.array(a)
    x.attach_grad()
    with ag.record():
        y = x * x
    y.backward(weft.array(g))
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * a * g, rtol=1e-12)


def test_backward_of_several_heads(rng):
    a = rng.standard_normal(4)
    x = weft.array(a)
    x.attach_grad()
    with ag.record():
        y1 = (x * x).sum()
        y2 = (x * 3).sum()
    ag.backward([y1, y2])
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * a + 3, rtol=1e-12)


def test_backward_twice_needs_retain_graph(rng):
    x = weft.array(rng.standard_normal(3))
    x.attach_grad("add")
    with ag.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 4 * x.asnumpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="retain_graph"):
        y.backward()


def test_autograd_grad(rng):
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    x, y = weft.array(a), weft.array(b)
    x.attach_grad()
    y.attach_grad()
    with ag.record():
        h = x * y
        z = (h.sin()).sum()
    gx, gh = ag.grad(z, [x, h], retain_graph=True)
    np.testing.assert_allclose(gx.asnumpy(), np.cos(a * b) * b, rtol=1e-12)
    np.testing.assert_allclose(gh.asnumpy(), np.cos(a * b), rtol=1e-12)
    # grad returns the gradients; the .grad buffers stay as they were.
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros(4))
    gy = ag.grad(z, y)
    assert isinstance(gy, weft.NDArray)
    np.testing.assert_allclose(gy.asnumpy(), np.cos(a * b) * a, rtol=1e-12)


def test_grad_of_untracked_variable_raises():
    x = weft.array([1.0, 2.0])
    with ag.record():
        y = (x * 2).sum()
    with pytest.raises(ValueError):
        ag.grad(y, [x])


def test_detach_stops_the_gradient(rng):
    a = rng.standard_normal(3)
    x = weft.array(a)
    x.attach_grad()
    with ag.record():
        y = (x * x.detach()).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), a, rtol=1e-12)


def test_inplace_writes_refused_while_recording():
    x = weft.array([1.0, 2.0])
    x.attach_grad()
    with ag.record():
        with pytest.raises(ValueError, match="in-place"):
            x += 1
        h = x * 2
        with pytest.raises(ValueError, match="in-place"):
            h *= 3
        with pytest.raises(ValueError, match="in-place"):
            h[0] = 5.0
        buf = weft.zeros(2, dtype="float64")
        with pytest.raises(ValueError, match="in-place"):
            weft.op.relu(h, out=buf)
        with pytest.raises(ValueError, match="in-place"):
            h.copyto(buf)
        # Arrays autograd does not track may still be written.
        buf += 1
        buf[1] = 7
    np.testing.assert_array_equal(buf.asnumpy(), [1.0, 7.0])
    np.testing.assert_array_equal(x.asnumpy(), [1.0, 2.0])
    x += 1  # outside record: allowed
    np.testing.assert_array_equal(x.asnumpy(), [2.0, 3.0])


def test_attach_grad_helper():
    xs = [weft.array([1.0]), weft.array([2.0])]
    ag.attach_grad(xs, "add")
    assert all(x.requires_grad for x in xs)
