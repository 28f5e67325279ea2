"""weft.nn training: optimizers against reference updates written out in NumPy (float64), losses
against NumPy, and a small CNN that learns a synthetic task through Trainer.fit, hybridized and
not."""
from __future__ import annotations

import io
import math
import pathlib
import sys

import numpy as np
import pytest

import weft
import weft.nn as nn

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def _params(seed=0, shapes=((3, 4), (5,))):
    rng = np.random.default_rng(seed)
    values = {f"p{i}": rng.standard_normal(s) for i, s in enumerate(shapes)}
    params = nn.Parameters({k: weft.array(v.astype(np.float32)) for k, v in values.items()})
    return params, values


def _grads(step, values):
    rng = np.random.default_rng(100 + step)
    return {k: rng.standard_normal(v.shape) * 3 for k, v in values.items()}


def _run(opt, ref_update, steps=4):
    params, ref = _params()
    state = {}
    for t in range(1, steps + 1):
        g = _grads(t, ref)
        opt.update(params, {k: weft.array(v.astype(np.float32)) for k, v in g.items()})
        for k in ref:
            ref[k] = ref_update(k, ref[k], g[k].astype(np.float32).astype(np.float64), t, state)
    for k in ref:
        np.testing.assert_allclose(params[k].asnumpy(), ref[k], rtol=2e-5, atol=2e-6)


def _clip(g, c):
    return g if c is None else np.clip(g, -c, c)


@pytest.mark.parametrize("clip", [None, 0.5])
def test_sgd_matches_the_reference_update(clip):
    lr, wd, rescale = 0.1, 0.01, 0.5

    def ref(k, w, g, t, st):
        g = _clip(rescale * g, clip)
        return w - lr * (g + wd * w)

    _run(nn.SGD(lr=lr, wd=wd, rescale_grad=rescale, clip_gradient=clip), ref)


def test_sgd_momentum_matches_the_reference_update():
    lr, mom, wd = 0.05, 0.9, 1e-3

    def ref(k, w, g, t, st):
        m = st.get(k, np.zeros_like(w))
        m = mom * m - lr * (g + wd * w)
        st[k] = m
        return w + m

    _run(nn.SGD(lr=lr, momentum=mom, wd=wd), ref)


def test_adam_matches_the_reference_update():
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 1e-3

    def ref(k, w, g, t, st):
        m, v = st.get(k, (np.zeros_like(w), np.zeros_like(w)))
        g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        st[k] = (m, v)
        lr_t = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
        return w - lr_t * m / (np.sqrt(v) + eps)

    _run(nn.Adam(lr=lr, beta1=b1, beta2=b2, epsilon=eps, wd=wd), ref)


def test_adamw_decays_decoupled_from_the_gradient():
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.99, 1e-8, 0.1

    def ref(k, w, g, t, st):
        m, v = st.get(k, (np.zeros_like(w), np.zeros_like(w)))
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        st[k] = (m, v)
        ratio = math.sqrt(1 - b2**t) / (1 - b1**t)
        return w - lr * (ratio * m / (np.sqrt(v) + eps) + wd * w)

    _run(nn.AdamW(lr=lr, beta1=b1, beta2=b2, epsilon=eps, wd=wd), ref)


def test_a_learning_rate_schedule_is_called_with_the_update_count():
    seen = []

    def schedule(n):
        seen.append(n)
        return 0.1 / n

    _run(nn.SGD(lr=schedule), lambda k, w, g, t, st: w - (0.1 / t) * g, steps=3)
    assert sorted(set(seen)) == [1, 2, 3]


def test_update_skips_parameters_without_gradients_and_auxiliary_states():
    params = nn.Parameters({"w": weft.ones((2,)), "aux": weft.ones((2,))}, aux_names={"aux"})
    params["w"].attach_grad()
    nn.SGD(lr=1.0).update(params)  # w.grad is zeros: unchanged; aux is never touched
    np.testing.assert_array_equal(params["w"].asnumpy(), [1, 1])
    nn.SGD(lr=1.0).update(params, {"w": weft.full((2,), 2.0)})
    np.testing.assert_array_equal(params["w"].asnumpy(), [-1, -1])
    np.testing.assert_array_equal(params["aux"].asnumpy(), [1, 1])


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def test_losses_match_numpy():
    rng = np.random.default_rng(3)
    pred = rng.standard_normal((6, 5)).astype(np.float32)
    label = rng.integers(0, 5, size=6)
    got = nn.SoftmaxCrossEntropyLoss()(weft.array(pred), weft.array(label.astype(np.float32)))
    want = -_log_softmax(pred.astype(np.float64))[np.arange(6), label]
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5)

    dense = rng.dirichlet(np.ones(5), size=6)
    got = nn.SoftmaxCrossEntropyLoss(sparse_label=False)(weft.array(pred),
                                                         weft.array(dense.astype(np.float32)))
    np.testing.assert_allclose(got.asnumpy(), -(_log_softmax(pred) * dense).sum(-1), rtol=1e-5)

    target = rng.standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(nn.L2Loss()(weft.array(pred), weft.array(target)).asnumpy(),
                               (0.5 * (pred - target) ** 2).mean(-1), rtol=1e-5)
    np.testing.assert_allclose(nn.L1Loss()(weft.array(pred), weft.array(target)).asnumpy(),
                               np.abs(pred - target).mean(-1), rtol=1e-5)
    z = rng.integers(0, 2, size=(6, 5)).astype(np.float32)
    p64 = pred.astype(np.float64)
    want = (np.log1p(np.exp(-np.abs(p64))) + np.maximum(p64, 0) - p64 * z).mean(-1)
    np.testing.assert_allclose(
        nn.SigmoidBinaryCrossEntropyLoss()(weft.array(pred), weft.array(z)).asnumpy(), want,
        rtol=1e-5)


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    rng = np.random.default_rng(4)
    pred = rng.standard_normal((4, 3)).astype(np.float32)
    label = np.array([0, 2, 1, 2])
    x = weft.array(pred)
    x.attach_grad()
    with weft.autograd.record():
        loss = nn.SoftmaxCrossEntropyLoss()(x, weft.array(label.astype(np.float32))).mean()
    loss.backward()
    soft = np.exp(_log_softmax(pred.astype(np.float64)))
    soft[np.arange(4), label] -= 1
    np.testing.assert_allclose(x.grad.asnumpy(), soft / 4, rtol=1e-5, atol=1e-7)


def _load_example():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import cnn_layers
    finally:
        sys.path.pop(0)
    return cnn_layers


@pytest.mark.parametrize("hybridize", [True, False])
def test_a_small_cnn_learns_the_synthetic_task(hybridize):
    ex = _load_example()
    x, y = ex.make_data(2048, seed=1)
    vx, vy = ex.make_data(512, seed=2)
    model = ex.build()
    params = model.init((None, 1, 16, 16), seed=0)
    if hybridize:
        model.hybridize()
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.SoftmaxCrossEntropyLoss(), params=params)
    out = io.StringIO()
    history = trainer.fit(nn.batches(x, y, 64, seed=0), epochs=3,
                          validation=nn.batches(vx, vy, 256, shuffle=False), stream=out)
    assert history["val_accuracy"][-1] >= 0.95, history
    assert history["loss"][-1] < history["loss"][0]
    text = out.getvalue()
    assert "epoch 3/3" in text and "samples/s" in text and "val_accuracy" in text


def test_the_stateful_style_trains_too():
    ex = _load_example()
    x, y = ex.make_data(256, seed=5)
    model = ex.build().initialize(seed=0)
    trainer = nn.Trainer(model, nn.SGD(lr=0.05, momentum=0.9), nn.SoftmaxCrossEntropyLoss())
    first, _ = trainer.step(x[:64], y[:64])
    first = first.item()
    for _ in range(10):
        loss, _ = trainer.step(x[:64], y[:64])
    assert model.params is trainer.params
    assert loss.item() < first


def test_the_example_runs_and_exports(tmp_path):
    ex = _load_example()
    assert ex.main(["--epochs", "3", "--samples", "2048", "--out", str(tmp_path), "--quiet"]) == 0
    assert (tmp_path / "cnn-symbol.json").exists() and (tmp_path / "cnn-0000.params").exists()
    layer, params = nn.import_model(tmp_path / "cnn")
    assert "batchnorm0_moving_mean" in params.aux_names
    x, _ = ex.make_data(8, seed=9)
    assert layer.apply(params, x).shape == (8, 4)
