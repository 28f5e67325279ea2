"""Losses on arrays (imperative, differentiable under ``weft.autograd.record``). Each returns
one loss per sample (shape (N,)), averaged over the other axes, as Gluon's losses do; reduce
with ``.mean()`` for a scalar to call ``backward()`` on."""
from __future__ import annotations

from .. import op
from ..ndarray import asarray

__all__ = ["Loss", "SoftmaxCrossEntropyLoss", "L2Loss", "L1Loss", "SigmoidBinaryCrossEntropyLoss"]


def _per_sample(x):
    if x.ndim <= 1:
        return x
    return op.mean(x, axis=tuple(range(1, x.ndim)))


class Loss:
    """Base class: ``loss(pred, label) -> (N,)``; ``weight`` scales it."""

    def __init__(self, weight=1.0):
        self.weight = float(weight)

    def __call__(self, pred, label):
        label = label if hasattr(label, "detach") else asarray(label)
        out = self.compute(pred, label)
        return out * self.weight if self.weight != 1.0 else out

    def compute(self, pred, label):  # pragma: no cover - abstract
        raise NotImplementedError


class SoftmaxCrossEntropyLoss(Loss):
    """-log softmax(pred)[label] along ``axis``. ``sparse_label``: labels are class indices
    (N,); otherwise a distribution of pred's shape. ``from_logits``: pred is log-probabilities
    already."""

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=1.0):
        super().__init__(weight)
        self.axis, self.sparse_label, self.from_logits = int(axis), sparse_label, from_logits

    def compute(self, pred, label):
        logp = pred if self.from_logits else op.log_softmax(pred, axis=self.axis)
        if self.sparse_label:
            loss = -op.pick(logp, label, axis=self.axis)
        else:
            loss = -op.sum(logp * label, axis=self.axis)
        return _per_sample(loss)


class L2Loss(Loss):
    """0.5 * (pred - label)^2, averaged per sample."""

    def compute(self, pred, label):
        d = pred - op.reshape(label, shape=pred.shape) if label.shape != pred.shape else \
            pred - label
        return _per_sample(op.square(d) * 0.5)


class L1Loss(Loss):
    """|pred - label|, averaged per sample."""

    def compute(self, pred, label):
        d = pred - op.reshape(label, shape=pred.shape) if label.shape != pred.shape else \
            pred - label
        return _per_sample(op.abs(d))


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of sigmoid(pred) against labels in [0, 1], in the stable form
    max(x, 0) - x*z + log(1 + exp(-|x|)) (``from_sigmoid``: pred is a probability already)."""

    def __init__(self, from_sigmoid=False, weight=1.0):
        super().__init__(weight)
        self.from_sigmoid = from_sigmoid

    def compute(self, pred, label):
        if label.shape != pred.shape:
            label = op.reshape(label, shape=pred.shape)
        if self.from_sigmoid:
            eps = 1e-12
            loss = -(op.log(pred + eps) * label + op.log(1 - pred + eps) * (1 - label))
        else:
            loss = op.relu(pred) - pred * label + op.log(1 + op.exp(-op.abs(pred)))
        return _per_sample(loss)
