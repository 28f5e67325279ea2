"""Optimizers: each update is one engine operation per parameter (``sgd_update``,
``sgd_mom_update``, ``adam_update``, ``adamw_update``), writing the weight in place and
updating its state arrays through FMutateInputs, so updates are asynchronous and ordered after
the gradients that feed them. Adam's bias correction is folded into the step size, as MXNet
does: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)."""
from __future__ import annotations

import math

from .. import op, zeros

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer:
    """Base class. ``lr``: a number, or a function of the update count (from 1) giving it.
    ``wd``: weight decay; ``rescale_grad`` scales gradients; ``clip_gradient`` (when not None)
    clips them to [-c, c] after rescaling."""

    def __init__(self, lr, wd=0.0, rescale_grad=1.0, clip_gradient=None):
        self.lr, self.wd = lr, float(wd)
        self.rescale_grad = float(rescale_grad)
        self.clip_gradient = clip_gradient
        self.num_update = 0
        self.state = {}

    def learning_rate(self):
        """The step size of the current update."""
        return float(self.lr(self.num_update) if callable(self.lr) else self.lr)

    def _common(self):
        return {"rescale_grad": self.rescale_grad,
                "clip_gradient": -1.0 if self.clip_gradient is None else
                float(self.clip_gradient)}

    def update(self, params, grads=None):
        """One step on every trainable parameter of ``params`` (a Parameters dict, or any dict of
        name -> array) with ``grads`` by name (default: each parameter's ``.grad``). Parameters
        without a gradient are skipped."""
        self.num_update += 1
        trainable = params.trainable() if hasattr(params, "trainable") else params
        for name, w in trainable.items():
            g = grads.get(name) if grads is not None else w.grad
            if g is None:
                continue
            self.step(name, w, g)

    def step(self, name, weight, grad):  # pragma: no cover - abstract
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum when ``momentum`` > 0:
    mom = momentum*mom - lr*(g + wd*w); w += mom."""

    def __init__(self, lr=0.01, momentum=0.0, wd=0.0, rescale_grad=1.0, clip_gradient=None):
        super().__init__(lr, wd, rescale_grad, clip_gradient)
        self.momentum = float(momentum)

    def step(self, name, weight, grad):
        lr = self.learning_rate()
        if self.momentum == 0.0:
            op.sgd_update(weight, grad, lr=lr, wd=self.wd, out=weight, **self._common())
            return
        mom = self.state.get(name)
        if mom is None:
            mom = self.state[name] = zeros(weight.shape, dtype=weight.dtype,
                                           device=weight.device)
        op.sgd_mom_update(weight, grad, mom, lr=lr, momentum=self.momentum, wd=self.wd,
                          out=weight, **self._common())


class Adam(Optimizer):
    """Adam (Kingma and Ba), with L2 weight decay added to the gradient."""

    def __init__(self, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None):
        super().__init__(lr, wd, rescale_grad, clip_gradient)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.steps = {}

    def _moments(self, name, weight):
        st = self.state.get(name)
        if st is None:
            st = self.state[name] = (
                zeros(weight.shape, dtype=weight.dtype, device=weight.device),
                zeros(weight.shape, dtype=weight.dtype, device=weight.device))
        t = self.steps[name] = self.steps.get(name, 0) + 1
        ratio = math.sqrt(1 - self.beta2**t) / (1 - self.beta1**t)
        return st, ratio

    def step(self, name, weight, grad):
        (mean, var), ratio = self._moments(name, weight)
        op.adam_update(weight, grad, mean, var, lr=self.learning_rate() * ratio,
                       beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon, wd=self.wd,
                       out=weight, **self._common())


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter):
    w -= lr * (ratio_t * m / (sqrt(v) + eps) + wd * w)."""

    def __init__(self, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.01,
                 rescale_grad=1.0, clip_gradient=None):
        super().__init__(lr, beta1, beta2, epsilon, wd, rescale_grad, clip_gradient)

    def step(self, name, weight, grad):
        (mean, var), ratio = self._moments(name, weight)
        op.adamw_update(weight, grad, mean, var, lr=ratio, eta=self.learning_rate(),
                        beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon, wd=self.wd,
                        out=weight, **self._common())
