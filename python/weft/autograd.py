"""Autograd for imperative code: record what runs inside ``record()``, then ``backward()``.

    >>> x = weft.array([1.0, 2.0, 3.0]); x.attach_grad()
    >>> with weft.autograd.record():
    ...     y = (x * x).sum()
    >>> y.backward(); x.grad.asnumpy()
    array([2., 4., 6.], dtype=float32)

The flags are per thread, as in MXNet: a scope on one thread does not record another's calls.
"""
from __future__ import annotations

import contextlib

from ._weft import autograd as _ag

is_recording = _ag.is_recording
is_training = _ag.is_training
set_recording = _ag.set_recording
set_training = _ag.set_training


@contextlib.contextmanager
def _scope(recording, training):
    prev_r = _ag.set_recording(recording) if recording is not None else None
    prev_t = _ag.set_training(training) if training is not None else None
    try:
        yield
    finally:
        if prev_t is not None:
            _ag.set_training(prev_t)
        if prev_r is not None:
            _ag.set_recording(prev_r)


def record(train_mode: bool = True):
    """Records operations for backward() in this scope (training mode unless train_mode=False)."""
    return _scope(True, train_mode)


def pause(train_mode: bool = False):
    """Stops recording in this scope (prediction mode unless train_mode=True)."""
    return _scope(False, train_mode)


def train_mode():
    """Training mode (Dropout masks, BatchNorm batch statistics) without changing recording."""
    return _scope(None, True)


def predict_mode():
    """Inference mode without changing recording."""
    return _scope(None, False)


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Gradients of `heads` (an array or a list) into the .grad of every leaf they depend on.
    `head_grads` seed the heads (ones when None). Pushed: returns at once."""
    _ag.backward(heads, head_grads, retain_graph, train_mode)


def grad(heads, variables, head_grads=None, retain_graph=False, train_mode=True):
    """The gradients of `heads` with respect to `variables` (arrays that need not have
    attach_grad), returned as a list (one array when `variables` is one array)."""
    from ._weft import NDArray
    out = _ag.grad(heads, variables, head_grads, retain_graph, train_mode)
    return out[0] if isinstance(variables, NDArray) else out


def attach_grad(arrays, grad_req="write"):
    """attach_grad on each array of `arrays`."""
    for a in arrays:
        a.attach_grad(grad_req)


class Function:
    """A differentiable function with a hand-written backward (MXNet's autograd.Function).

    Subclass it and define ``forward(*inputs)`` (runs unrecorded, returns an array or a tuple)
    and ``backward(*out_grads)`` (one gradient, or None, per input). ``save_for_backward`` keeps
    arrays for the backward::

        class Sigmoid(weft.autograd.Function):
            def forward(self, x):
                y = 1 / (1 + weft.op.exp(-x))
                self.save_for_backward(y)
                return y

            def backward(self, dy):
                (y,) = self.saved_tensors
                return dy * y * (1 - y)

    An instance is called once per use; under ``record()`` its outputs join the tape.
    """

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *arrays):
        """Keeps ``arrays`` for ``backward`` (as ``self.saved_tensors``)."""
        self.saved_tensors = arrays

    def forward(self, *inputs):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def backward(self, *out_grads):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__}.backward is not defined")

    def __call__(self, *inputs):
        from ._weft import NDArray
        with pause(train_mode=is_training()):
            result = self.forward(*inputs)
        single = isinstance(result, NDArray)
        outputs = [result] if single else list(result)
        # Outputs that are inputs (or each other) must become distinct arrays to carry entries.
        seen = {id(x) for x in inputs}
        for i, o in enumerate(outputs):
            if id(o) in seen:
                outputs[i] = o.copy()
            seen.add(id(outputs[i]))
        arrays = [x for x in inputs if isinstance(x, NDArray)]
        if len(arrays) != len(inputs):
            raise TypeError(f"{type(self).__name__}: every input must be an NDArray")

        def run_backward(grads):
            r = self.backward(*grads)
            r = [r] if isinstance(r, NDArray) or r is None else list(r)
            return r

        _ag.record_function(type(self).__name__, arrays, outputs, run_backward)
        return outputs[0] if single else tuple(outputs)
