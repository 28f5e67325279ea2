"""Training: ``Trainer.step`` (forward under autograd, loss, backward, one optimizer update) and
``Trainer.fit`` (epochs over batches with a progress bar and metrics), on one process or
data-parallel over ``weft.dist`` (``distributed=True``)."""
from __future__ import annotations

import sys
import time

import numpy as np

from .. import autograd
from ..ndarray import asarray

__all__ = ["Trainer", "Accuracy", "batches"]


class Accuracy:
    """The fraction of samples whose arg-max prediction equals the label."""

    name = "accuracy"

    def __init__(self):
        self.reset()

    def reset(self):
        self.correct, self.total = 0, 0

    def update(self, pred, label):
        p = np.asarray(pred.asnumpy() if hasattr(pred, "asnumpy") else pred)
        y = np.asarray(label.asnumpy() if hasattr(label, "asnumpy") else label).reshape(-1)
        self.correct += int((p.reshape(len(y), -1).argmax(axis=1) == y.astype(np.int64)).sum())
        self.total += len(y)

    def get(self):
        return self.correct / self.total if self.total else float("nan")


def batches(x, y, batch_size, shuffle=True, seed=0, drop_last=False):
    """An iterable of (x, y) batches over NumPy arrays, shuffled afresh each pass (seeded)."""

    class _Batches:
        def __init__(self):
            self.epoch = 0

        def __len__(self):
            n = len(x) // batch_size
            return n if drop_last or len(x) % batch_size == 0 else n + 1

        def __iter__(self):
            idx = np.arange(len(x))
            if shuffle:
                np.random.default_rng(seed + self.epoch).shuffle(idx)
            self.epoch += 1
            for i in range(0, len(idx), batch_size):
                j = idx[i:i + batch_size]
                if drop_last and len(j) < batch_size:
                    break
                yield x[j], y[j]

    if len(x) != len(y):
        raise ValueError(f"batches: {len(x)} inputs but {len(y)} labels")
    return _Batches()


class _Progress:
    def __init__(self, total, epoch, epochs, stream, enabled):
        self.total, self.epoch, self.epochs = total, epoch, epochs
        self.stream, self.enabled = stream, enabled
        self.start = time.perf_counter()

    def show(self, done, samples, values, final=False):
        if not self.enabled:
            return
        width = 24
        frac = done / self.total if self.total else 1.0
        bar = "=" * int(width * frac) + ("" if frac >= 1 else ">")
        rate = samples / max(time.perf_counter() - self.start, 1e-9)
        text = " ".join(f"{k} {v:.4f}" for k, v in values.items())
        total = self.total if self.total else "?"
        self.stream.write(f"\repoch {self.epoch}/{self.epochs} [{bar:<{width}}] {done}/{total} "
                          f"{text} {rate:.0f} samples/s")
        if final:
            self.stream.write("\n")
        self.stream.flush()


class Trainer:
    """Trains ``model`` (a Layer) with ``optimizer`` on ``loss`` (a Loss).

    ``params``: the parameters to train (default: the model's own, from ``initialize``); their
    gradients are attached here. A hybridized model trains through its bound graph.

    ``distributed=True`` trains data-parallel over the processes of ``weft.dist`` (joined here
    when the program has not called ``weft.dist.init()``): every rank runs this trainer on its
    own share of each batch (``weft.data``'s ``Dataset.shard(weft.dist.size(),
    weft.dist.rank())``, or a slice of the global batch). The parameters, auxiliary states
    included, are broadcast from rank 0 once they exist (here, or at the first step when they
    are deferred); after each backward the gradients are averaged over ranks (``allreduce``
    with mean, in the order backward produces them, each starting as soon as it is written)
    before the optimizer's update. With equal shares and a loss that is a mean over the batch,
    every rank then takes the step the whole global batch would give. Auxiliary states
    (BatchNorm's moving statistics) stay per rank after the start."""

    def __init__(self, model, optimizer, loss, params=None, distributed=False):
        self.model, self.optimizer, self.loss = model, optimizer, loss
        self.params = params if params is not None else model.params
        self.distributed = bool(distributed)
        if self.distributed:
            from .. import dist

            if not dist.initialized():
                dist.init()
        if self.params is not None:
            self._attach()
            self._broadcast_parameters()

    def _attach(self):
        for v in self.params.trainable().values():
            if not v.requires_grad:
                v.attach_grad()

    def _trainable(self):
        return self.params.trainable() if hasattr(self.params, "trainable") else self.params

    def _broadcast_parameters(self):
        # Once, when the parameters first exist: every rank starts from rank 0's values.
        if self.distributed:
            from .. import dist

            dist.broadcast_parameters(list(self.params.items()), root=0)

    def _average_gradients(self):
        # Reverse registration order: backward writes the last layer's gradients first.
        from .. import dist

        grads = [(k, v.grad) for k, v in reversed(list(self._trainable().items()))
                 if v.grad is not None]
        dist.allreduce_gradients(grads)

    def step(self, x, y):
        """One training step on a batch; returns the batch's mean loss (an array: reading it
        waits) and the model's output."""
        x = x if hasattr(x, "detach") else asarray(x)
        y = y if hasattr(y, "detach") else asarray(y)
        if self.params is None:  # deferred: the model's own, made at its first call
            if self.model._init_seed is None:
                self.model.initialize()
            with autograd.pause():
                self.model(x)
            self.params = self.model.params
            self._attach()
            self._broadcast_parameters()
        with autograd.record():
            out = self.model.apply(self.params, x, train=True)
            loss = self.loss(out, y).mean()
        loss.backward()
        if self.distributed:
            self._average_gradients()
        self.optimizer.update(self.params)
        return loss, out

    def evaluate(self, data, metrics=(Accuracy,)):
        """Metric values over ``data`` (an iterable of (x, y) batches) in inference mode."""
        ms = [m() if isinstance(m, type) else m for m in metrics]
        for m in ms:
            m.reset()
        for x, y in data:
            out = self.model.apply(self.params, x, train=False)
            for m in ms:
                m.update(out, y)
        return {m.name: m.get() for m in ms}

    def fit(self, data, epochs=1, metrics=(Accuracy,), validation=None, progress=True,
            stream=None):
        """Trains for ``epochs`` passes over ``data`` (an iterable of (x, y) batches, iterated
        afresh each epoch, e.g. ``batches(x, y, 64)``). Shows a progress bar with the running
        loss, metrics and samples per second (``progress=False`` hides it). Returns the history:
        a dict of lists per epoch (loss, each metric, and ``val_<metric>`` with ``validation``)."""
        stream = stream or sys.stderr
        ms = [m() if isinstance(m, type) else m for m in metrics]
        history = {"loss": []}
        for epoch in range(1, epochs + 1):
            for m in ms:
                m.reset()
            total = len(data) if hasattr(data, "__len__") else 0
            bar = _Progress(total, epoch, epochs, stream, progress)
            loss_sum, count, samples = 0.0, 0, 0
            for i, (x, y) in enumerate(data, 1):
                loss, out = self.step(x, y)
                loss_sum += loss.item()
                count += 1
                samples += len(x)
                for m in ms:
                    m.update(out, y)
                values = {"loss": loss_sum / count, **{m.name: m.get() for m in ms}}
                bar.show(i, samples, values)
            values = {"loss": loss_sum / max(count, 1), **{m.name: m.get() for m in ms}}
            if validation is not None:
                values.update({f"val_{k}": v for k, v in self.evaluate(validation, ms).items()})
            bar.show(count, samples, values, final=True)
            for k, v in values.items():
                history.setdefault(k, []).append(v)
        return history
