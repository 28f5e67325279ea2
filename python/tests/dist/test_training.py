"""Data-parallel training with weft.nn.Trainer(distributed=True): rank r trains on slice r of a
fixed global batch of 8, and after every step its parameters must equal those of a plain Trainer
that every rank also runs locally on the whole batch (the loss is a mean over the batch, so the
mean of the ranks' gradients is the whole batch's)."""
import numpy as np
import pytest

import weft
import weft.dist as dist
import weft.nn as nn

GLOBAL_BATCH = 8
STEPS = 3


def build():
    return nn.Sequential(nn.Conv2D(4, 3, padding=1), nn.ReLU(), nn.MaxPool2D(2), nn.Flatten(),
                         nn.Dense(3))


def batch(step):
    """The global batch of a step: the same on every rank."""
    rng = np.random.default_rng([2024, step])
    x = rng.standard_normal((GLOBAL_BATCH, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 3, size=GLOBAL_BATCH).astype(np.float32)
    return x, y


def my_share(x):
    n = GLOBAL_BATCH // dist.size()
    return x[dist.rank() * n:(dist.rank() + 1) * n]


def assert_same_parameters(got, want, step):
    assert len(got) == len(want)
    for (kg, g), (kw, w) in zip(got.items(), want.items()):
        g, w = g.asnumpy(), w.asnumpy()
        scale = max(float(np.abs(w).max()), 1e-3)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * scale,
                                   err_msg=f"step {step}: {kg} (reference {kw})")


@pytest.fixture(autouse=True)
def _divisible():
    if GLOBAL_BATCH % dist.size() != 0:
        pytest.skip(f"a batch of {GLOBAL_BATCH} does not split over {dist.size()} ranks")


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
def test_distributed_sgd_steps_equal_whole_batch_steps(hybridize):
    model, ref_model = build(), build()
    if hybridize:  # the distributed model through its bound graph; the reference imperative
        model.hybridize()
    params = model.init((None, 1, 8, 8), seed=0)
    ref_params = ref_model.init((None, 1, 8, 8), seed=0)
    if dist.rank() != 0:  # the broadcast at construction must replace these
        rng = np.random.default_rng(dist.rank())
        for k, v in list(params.items()):
            params[k] = weft.array(rng.standard_normal(v.shape).astype(np.float32))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), nn.SoftmaxCrossEntropyLoss(), params=params,
                         distributed=True)
    reference = nn.Trainer(ref_model, nn.SGD(lr=0.1), nn.SoftmaxCrossEntropyLoss(),
                           params=ref_params)
    assert_same_parameters(trainer.params, reference.params, 0)
    for step in range(1, STEPS + 1):
        x, y = batch(step)
        local_loss, out = trainer.step(my_share(x), my_share(y))
        ref_loss, ref_out = reference.step(x, y)
        assert out.shape == (GLOBAL_BATCH // dist.size(), 3)
        assert_same_parameters(trainer.params, reference.params, step)
        # The ranks' mean loss is the whole batch's.
        mean_loss = dist.allreduce(local_loss.reshape(1), op="mean", name=f"loss.{step}")
        np.testing.assert_allclose(mean_loss.asnumpy()[0], ref_loss.item(), rtol=1e-5)


def test_deferred_parameters_are_broadcast_at_the_first_step():
    model = build().initialize(seed=dist.rank())  # different on every rank until the broadcast
    ref_model = build().initialize(seed=0)
    trainer = nn.Trainer(model, nn.SGD(lr=0.05, momentum=0.9), nn.SoftmaxCrossEntropyLoss(),
                         distributed=True)
    reference = nn.Trainer(ref_model, nn.SGD(lr=0.05, momentum=0.9),
                           nn.SoftmaxCrossEntropyLoss())
    for step in range(1, STEPS + 1):
        x, y = batch(10 + step)
        trainer.step(my_share(x), my_share(y))
        reference.step(x, y)
        assert_same_parameters(trainer.params, reference.params, step)
