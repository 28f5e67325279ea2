"""weft.nn hybridize: a hybridized model (one traced graph run by a bound executor, recorded on
the autograd tape as one node) against the same model on the imperative path: outputs,
parameter and input gradients, BatchNorm's moving statistics, rebinding per input shape and per
parameter set, the stale-backward guard, Lambda, Dropout; and weft.autograd.Function against
analytic gradients."""
import numpy as np
import pytest

import weft
import weft.nn as nn
from weft import autograd as ag

RTOL = 1e-5  # fusion and a different operator order may change float32 rounding


def assert_close(actual, expected, rtol=RTOL, what="", scale=0.0):
    """Per element |a - e| <= atol + rtol*|e|, atol a small fraction of the largest |e| or of
    `scale` if larger (so that elements near zero, where the relative error means nothing, are
    held to the scale)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    atol = rtol * 0.1 * max(float(np.abs(expected).max(initial=0.0)), scale, 1e-30)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def small_cnn():
    return nn.Sequential(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.ReLU(), nn.MaxPool2D(2),
                         nn.Flatten(), nn.Dense(5))


def residual_block():
    body = nn.Sequential(nn.Conv2D(3, 3, padding=1), nn.BatchNorm(), nn.ReLU(),
                         nn.Conv2D(3, 3, padding=1), nn.BatchNorm())
    return nn.Sequential(nn.Residual(body, activation="relu"), nn.Flatten(), nn.Dense(4))


def concat_block():
    branches = [nn.Conv2D(2, 1),
                nn.Sequential(nn.Conv2D(3, 3, padding=1), nn.BatchNorm(), nn.ReLU()),
                nn.MaxPool2D(3, 1, 1)]
    return nn.Sequential(nn.Concat(branches), nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(3))


def lstm_model():
    return nn.Sequential(nn.LSTM(6, layout="NTC"), nn.Dense(3))


MODELS = {
    "cnn": (small_cnn, (2, 3, 8, 8)),
    "residual": (residual_block, (2, 3, 6, 6)),
    "concat": (concat_block, (2, 3, 6, 6)),
    "lstm": (lstm_model, (2, 5, 4)),
    "resnet18": (lambda: nn.models.resnet18(classes=10), (2, 3, 32, 32)),
}


def perturb_batchnorm(params, rng):
    """Moves gamma, beta and the moving statistics off their initial 1/0 so that a wrong or
    missing one shows."""
    for name, v in params.items():
        shape = v.shape
        if name.endswith("_gamma") or name.endswith("_moving_var"):
            params[name][:] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        elif name.endswith("_beta") or name.endswith("_moving_mean"):
            params[name][:] = rng.uniform(-0.2, 0.2, shape).astype(np.float32)
    return params


def make(name, rng):
    build, shape = MODELS[name]
    model = build()
    params = perturb_batchnorm(model.init((None,) + shape[1:], seed=3), rng)
    x = rng.standard_normal(shape).astype(np.float32)
    return model, params, x


def train_step(model, params, x, w, hybrid):
    """Under record with train=True: the output and the loss sum(y*w); gradients into params."""
    model.hybridize(hybrid)
    with ag.record():
        y = model.apply(params, x, train=True)
        loss = (y * w).sum()
    loss.backward()
    return y.asnumpy()


@pytest.mark.parametrize("name", list(MODELS))
def test_inference_equals_imperative(name, rng):
    model, params, x = make(name, rng)
    expected = model.apply(params, x).asnumpy()
    model.hybridize()
    got = model.apply(params, x)
    assert model._hybrid is not None and len(model._hybrid.bound) == 1
    assert_close(got.asnumpy(), expected, what=f"{name} output")
    # The moving statistics are read, not updated, at inference.
    before = {k: v.asnumpy() for k, v in params.auxiliary().items()}
    model.apply(params, x)
    for k, v in params.auxiliary().items():
        np.testing.assert_array_equal(v.asnumpy(), before[k], err_msg=k)


@pytest.mark.parametrize("name", list(MODELS))
def test_training_gradients_and_moving_stats_equal_imperative(name, rng):
    model, params, x = make(name, rng)
    x = weft.array(x)
    p_imp = params.copy().attach_grad()
    p_hyb = params.copy().attach_grad()
    with ag.pause():
        shape = model.apply(params, x).shape
    w = weft.array(rng.standard_normal(shape).astype(np.float32))
    y_imp = train_step(model, p_imp, x, w, hybrid=False)
    y = train_step(model, p_hyb, x, w, hybrid=True)
    assert_close(y, y_imp, what=f"{name} training output")
    assert p_hyb.trainable(), name
    # A convolution's bias followed by training-mode BatchNorm has an exact gradient of zero: both
    # paths return rounding noise of the size of the terms summed, which depends on the order the
    # threads add them in. Such gradients are held to the scale of the largest gradient.
    scale = max(float(np.abs(p_imp[k].grad.asnumpy()).max()) for k in p_imp.trainable())
    for k in p_imp.trainable():
        g_imp, g_hyb = p_imp[k].grad, p_hyb[k].grad
        assert g_imp is not None and g_hyb is not None, k
        assert_close(g_hyb.asnumpy(), g_imp.asnumpy(), what=f"{name} grad {k}", scale=scale)
    for k in p_imp.auxiliary():
        moved = np.abs(p_imp[k].asnumpy() - params[k].asnumpy()).max()
        assert moved > 1e-6, f"{name}: {k} was not updated in training"
        assert_close(p_hyb[k].asnumpy(), p_imp[k].asnumpy(), what=f"{name} aux {k}")


def test_batchnorm_moving_stats_follow_momentum(rng):
    """The update both paths make, against NumPy: moving = moving*0.9 + batch*0.1, with the
    biased batch variance (as MXNet)."""
    model = nn.Sequential(nn.BatchNorm())
    params = perturb_batchnorm(model.init((None, 3, 4, 4)), rng)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32) * 2 + 1
    mean = x.astype(np.float64).mean(axis=(0, 2, 3))
    var = x.astype(np.float64).var(axis=(0, 2, 3))
    for hybrid in (False, True):
        p = params.copy()
        model.hybridize(hybrid)
        model.apply(p, x, train=True)
        name = model[0].name
        np.testing.assert_allclose(p[f"{name}_moving_mean"].asnumpy(),
                                   params[f"{name}_moving_mean"].asnumpy() * 0.9 + mean * 0.1,
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(p[f"{name}_moving_var"].asnumpy(),
                                   params[f"{name}_moving_var"].asnumpy() * 0.9 + var * 0.1,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["cnn", "lstm"])
def test_input_gradient(name, rng):
    model, params, x_np = make(name, rng)
    grads = []
    w = None
    for hybrid in (False, True):
        model.hybridize(hybrid)
        x = weft.array(x_np)
        x.attach_grad()
        with ag.record():
            y = model.apply(params, x)  # parameters without attach_grad: only x's gradient
            if w is None:
                w = weft.array(rng.standard_normal(y.shape).astype(np.float32))
            loss = (y * w).sum()
        loss.backward()
        assert x.grad is not None
        grads.append(x.grad.asnumpy())
    assert np.abs(grads[0]).max() > 0
    assert_close(grads[1], grads[0], what=f"{name} input gradient")


def test_input_gradient_of_dense_against_numpy(rng):
    """An independent check of the hybridized backward: y = x W^T + b, loss = sum(y*w), so
    dL/dx = w W and dL/dW = w^T x."""
    model = nn.Dense(3)
    params = model.init((None, 4)).attach_grad()
    model.hybridize()
    x = weft.array(rng.standard_normal((2, 4)).astype(np.float32))
    x.attach_grad()
    w = rng.standard_normal((2, 3)).astype(np.float32)
    with ag.record():
        loss = (model.apply(params, x) * weft.array(w)).sum()
    loss.backward()
    W = params["dense0_weight"].asnumpy().astype(np.float64)
    np.testing.assert_allclose(x.grad.asnumpy(), w.astype(np.float64) @ W, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["dense0_weight"].grad.asnumpy(),
                               w.T.astype(np.float64) @ x.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["dense0_bias"].grad.asnumpy(), w.sum(axis=0), rtol=1e-5,
                               atol=1e-6)


def test_rebinds_per_batch_size_and_reuses(rng):
    model, params, _ = make("cnn", rng)
    xs = {n: rng.standard_normal((n, 3, 8, 8)).astype(np.float32) for n in (2, 5)}
    expected = {n: model.apply(params, x).asnumpy() for n, x in xs.items()}
    model.hybridize()
    bound = model._hybrid.bound
    seen = {}
    for step, n in enumerate((2, 5, 2)):
        y = model.apply(params, xs[n])
        assert y.shape == (n, 5)
        assert_close(y.asnumpy(), expected[n], what=f"batch {n} (call {step})")
        assert len(bound) == (1 if step == 0 else 2), f"after call {step}: {list(bound)}"
        entry = next(b for k, b in bound.items() if k[0] == ((n, 3, 8, 8),))
        if n in seen:
            assert entry is seen[n], "a repeated shape bound again"
        seen[n] = entry
    # Training mode is its own entry; a repeated call reuses it.
    p = params.copy()
    model.apply(p, xs[2], train=True)
    assert len(bound) == 3
    model.apply(p, xs[2], train=True)
    assert len(bound) == 3
    modes = sorted(k[2] for k in bound)
    assert modes == [False, False, True]


def test_stale_backward_is_refused(rng):
    model, params, x = make("cnn", rng)
    params.attach_grad()
    model.hybridize()
    x = weft.array(x)
    with ag.record():
        loss1 = model.apply(params, x).sum()
        loss2 = (model.apply(params, x) * 2).sum()
    with pytest.raises(weft.WeftError, match="backward"):
        loss1.backward()
        weft.waitall()
    loss2.backward()
    got = {k: v.grad.asnumpy() for k, v in params.trainable().items()}
    # The same gradients from the imperative path (loss2 = 2 * sum(y)).
    model.hybridize(False)
    ref = params.copy().attach_grad()
    with ag.record():
        loss = (model.apply(ref, x) * 2).sum()
    loss.backward()
    for k, v in ref.trainable().items():
        assert_close(got[k], v.grad.asnumpy(), what=k)


def test_backward_before_the_next_forward_works(rng):
    """The guard only refuses a stale graph: forward, backward, forward, backward is fine."""
    model, params, x = make("cnn", rng)
    params.attach_grad()
    model.hybridize()
    x = weft.array(x)
    grads = []
    for _ in range(2):
        with ag.record():
            loss = model.apply(params, x).sum()
        loss.backward()
        grads.append(params["dense0_weight"].grad.asnumpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_new_parameter_arrays_rebind(rng):
    model, params_a, x = make("cnn", rng)
    params_b = perturb_batchnorm(model.init((None, 3, 8, 8), seed=11), rng)
    ref_a = model.apply(params_a, x).asnumpy()
    ref_b = model.apply(params_b, x).asnumpy()
    assert np.abs(ref_a - ref_b).max() > 1e-3
    model.hybridize()
    assert_close(model.apply(params_a, x).asnumpy(), ref_a, what="params a")
    assert_close(model.apply(params_b, x).asnumpy(), ref_b, what="params b")
    assert_close(model.apply(params_a, x).asnumpy(), ref_a, what="params a again")
    assert len(model._hybrid.bound) == 1  # the entry for this shape was bound again
    # One array replaced in the same dict counts as new parameters too (the dense layer is the
    # last: its bias adds to the output).
    old_bias = params_a["dense0_bias"].asnumpy()
    params_a["dense0_bias"] = weft.array(np.full(5, 3.0, np.float32))
    assert_close(model.apply(params_a, x).asnumpy(), ref_a - old_bias + 3.0,
                 what="replaced bias")


def test_in_place_parameter_updates_are_seen(rng):
    """An optimizer updates the arrays in place: the bound graph must read the new values."""
    model, params, x = make("cnn", rng)
    model.hybridize()
    y0 = model.apply(params, x).asnumpy()
    params["dense0_bias"][:] = params["dense0_bias"].asnumpy() + 1.5
    y1 = model.apply(params, x).asnumpy()
    np.testing.assert_allclose(y1 - y0, np.full_like(y0, 1.5), rtol=0, atol=1e-5)


def test_lambda_hybridizes(rng):
    seen = []

    def relu6(F, x):
        seen.append(F)
        return F.clip(x, a_min=0.0, a_max=0.5)

    model = nn.Sequential(nn.Dense(6), nn.Lambda(relu6))
    params = model.init((None, 4))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y_imp = model.apply(params, x).asnumpy()
    assert seen == [weft.sym, weft.op]  # init traced it; apply ran it imperatively
    W = params[model[0].name + "_weight"].asnumpy().astype(np.float64)
    b = params[model[0].name + "_bias"].asnumpy().astype(np.float64)
    np.testing.assert_allclose(y_imp, np.clip(x @ W.T + b, 0, 0.5), rtol=1e-5, atol=1e-6)
    seen.clear()
    model.hybridize()
    y1 = model.apply(params, x).asnumpy()
    y2 = model.apply(params, x).asnumpy()
    assert seen == [weft.sym], "hybridized: traced once with weft.sym, never run imperatively"
    assert_close(y1, y_imp, what="lambda")
    np.testing.assert_array_equal(y1, y2)


def test_hybridize_false_goes_back_to_imperative(rng):
    calls = []

    def count(F, x):
        calls.append(F)
        return F.relu(x)

    model = nn.Sequential(nn.Dense(3), nn.Lambda(count))
    params = model.init((None, 4))
    x = rng.standard_normal((2, 4)).astype(np.float32)
    model.hybridize()
    y_h = model.apply(params, x).asnumpy()
    calls.clear()
    assert model.hybridize(False) is model
    assert model._hybrid is None
    y_i = model.apply(params, x).asnumpy()
    assert calls == [weft.op]
    assert_close(y_h, y_i, what="hybridized vs imperative")


def test_dropout_train_under_hybridize(rng):
    p = 0.4
    model = nn.Sequential(nn.Dropout(p))
    params = model.init((None, 50, 40))
    model.hybridize()
    x = rng.uniform(0.5, 2.0, (2, 50, 40)).astype(np.float32)
    y = model.apply(params, x, train=True).asnumpy()
    zero = y == 0
    kept = ~zero
    np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-6)
    frac = zero.mean()
    assert 0.3 < frac < 0.5, f"dropped fraction {frac} for p={p}"
    # Another call draws another mask; inference is the identity.
    y2 = model.apply(params, x, train=True).asnumpy()
    assert not np.array_equal(y2 == 0, zero)
    np.testing.assert_array_equal(model.apply(params, x).asnumpy(), x)


def test_outputs_are_not_overwritten_by_the_next_call(rng):
    model, params, _ = make("cnn", rng)
    xa = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    xb = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    ref_a = model.apply(params, xa).asnumpy()
    model.hybridize()
    ya = model.apply(params, xa)
    yb = model.apply(params, xb)
    assert_close(ya.asnumpy(), ref_a, what="first output after a second call")
    assert np.abs(ya.asnumpy() - yb.asnumpy()).max() > 1e-3
    # Writing into an output does not change the next call's result either.
    ya[:] = 0
    assert_close(model.apply(params, xa).asnumpy(), ref_a, what="after writing an output")


def test_multiple_outputs_hybridize(rng):
    model = nn.Parallel([nn.Dense(3), nn.Sequential(nn.Dense(2), nn.ReLU())])
    params = model.init((None, 4)).attach_grad()
    x = rng.standard_normal((2, 4)).astype(np.float32)
    ref = [y.asnumpy() for y in model.apply(params, x)]
    model.hybridize()
    got = model.apply(params, x)
    assert isinstance(got, tuple) and len(got) == 2
    for g, r in zip(got, ref):
        assert_close(g.asnumpy(), r)


# ---- weft.autograd.Function ---------------------------------------------------------------------
class Cube(ag.Function):
    """x**3 with a hand-written backward 3x**2 dy."""

    def forward(self, x):
        assert not ag.is_recording(), "Function.forward must run unrecorded"
        self.save_for_backward(x)
        return x * x * x

    def backward(self, dy):
        (x,) = self.saved_tensors
        return dy * 3 * x * x


class MulAdd(ag.Function):
    """(a*b, a+b): two inputs, two outputs."""

    def forward(self, a, b):
        self.save_for_backward(a, b)
        return a * b, a + b

    def backward(self, g_prod, g_sum):
        a, b = self.saved_tensors
        return g_prod * b + g_sum, g_prod * a + g_sum


class ScaleFirst(ag.Function):
    """2*a, with no gradient for the second input (None)."""

    def forward(self, a, b):
        return a * 2

    def backward(self, dy):
        return dy * 2, None


def test_function_joins_the_tape(rng):
    x_np = rng.uniform(-1.5, 1.5, (3, 4))
    x = weft.array(x_np.astype(np.float32))
    x.attach_grad()
    with ag.record():
        y = Cube()(x)
    y.backward()
    np.testing.assert_allclose(y.asnumpy(), x_np ** 3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * x_np ** 2, rtol=1e-5, atol=1e-6)


def test_function_composed_with_recorded_ops(rng):
    """loss = sum(sin(cube(2x)) * w): dL/dx = cos(8x^3) * 24x^2 * w."""
    x_np = rng.uniform(-0.8, 0.8, (5,))
    w = rng.standard_normal(5)
    x = weft.array(x_np.astype(np.float32))
    x.attach_grad()
    with ag.record():
        loss = (weft.op.sin(Cube()(x * 2)) * weft.array(w.astype(np.float32))).sum()
    loss.backward()
    expected = np.cos(8 * x_np ** 3) * 24 * x_np ** 2 * w
    np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_function_two_inputs_two_outputs(rng):
    a_np, b_np = rng.standard_normal((2, 6))
    wp, ws = rng.standard_normal((2, 6))
    a, b = weft.array(a_np.astype(np.float32)), weft.array(b_np.astype(np.float32))
    a.attach_grad()
    b.attach_grad()
    with ag.record():
        prod, total = MulAdd()(a, b)
        loss = (prod * weft.array(wp.astype(np.float32))
                + total * weft.array(ws.astype(np.float32))).sum()
    loss.backward()
    np.testing.assert_allclose(a.grad.asnumpy(), wp * b_np + ws, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.grad.asnumpy(), wp * a_np + ws, rtol=1e-5, atol=1e-6)


def test_function_none_gradient(rng):
    a = weft.array(rng.standard_normal(4).astype(np.float32))
    b = weft.array(rng.standard_normal(4).astype(np.float32))
    a.attach_grad()
    b.attach_grad()
    with ag.record():
        loss = ScaleFirst()(a, b).sum()
    loss.backward()
    np.testing.assert_allclose(a.grad.asnumpy(), np.full(4, 2.0))
    np.testing.assert_array_equal(b.grad.asnumpy(), np.zeros(4))


def test_function_with_a_hybridized_model(rng):
    """A Function applied to a hybridized model's output: the chain rule through both nodes,
    against the imperative model."""
    model, params, x = make("cnn", rng)
    grads = []
    for hybrid in (False, True):
        p = params.copy().attach_grad()
        model.hybridize(hybrid)
        with ag.record():
            loss = Cube()(model.apply(p, x) * 0.1).sum()
        loss.backward()
        grads.append({k: v.grad.asnumpy() for k, v in p.trainable().items()})
    for k in grads[0]:
        assert_close(grads[1][k], grads[0][k], what=k)
