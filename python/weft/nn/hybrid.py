"""Hybridized layers: the model traced once to a graph and run by a bound executor (the memory
plan, and the conv+BN+ReLU fusion for inference), bound again per input shape.

Under ``weft.autograd.record()`` a hybridized call joins the tape as one node whose backward is
the executor's backward pass, so gradients reach the parameters as on the imperative path.
The executor keeps the activations of its last forward: the backward of a call must run before
the same bound graph runs forward again (a second call with the same shapes and mode); a stale
backward is refused with an error rather than computing wrong gradients.
"""
from __future__ import annotations

import itertools

from .. import _weft, autograd

_MAX_BOUND = 8  # bound executors kept per model (one per input shape and mode)


class _Bound:
    __slots__ = ("executor", "param_ids", "generation", "grad_names", "input_grads")

    def __init__(self, executor, param_ids, grad_names, input_grads):
        self.executor = executor
        self.param_ids = param_ids
        self.generation = 0
        self.grad_names = grad_names
        self.input_grads = input_grads


class CachedGraph:
    """The traced graph of a layer and its bound executors."""

    def __init__(self, layer, fuse=True):
        self.layer = layer
        self.fuse = fuse
        self.symbol = None
        self.num_inputs = None
        self.bound = {}
        self._counter = itertools.count(1)

    def _trace(self, n):
        if self.symbol is None or self.num_inputs != n:
            self.symbol = self.layer.symbol(n)
            self.num_inputs = n
            self.args = self.symbol.list_arguments()
            self.aux = self.symbol.list_auxiliary_states()
            self.bound.clear()
        return self.symbol

    def run(self, params, xs, train):
        sym = self._trace(len(xs))
        names = self.layer.input_names(len(xs))
        param_names = [a for a in self.args if a not in names]
        missing = [p for p in param_names + self.aux if p not in params]
        if missing:
            raise KeyError(f"{type(self.layer).__name__} '{self.layer.name}': parameters "
                           f"missing from params: {', '.join(missing)}")
        recording = autograd.is_recording()
        grad_names = [p for p in param_names if params[p].requires_grad] if recording else []
        input_grads = [recording and x.requires_grad for x in xs]
        needs_grad = bool(grad_names) or any(input_grads)
        key = (tuple(tuple(x.shape) for x in xs), tuple(str(x.dtype) for x in xs), bool(train),
               tuple(grad_names), tuple(input_grads))
        ids = tuple(id(params[p]) for p in param_names + self.aux)
        b = self.bound.get(key)
        if b is None or b.param_ids != ids:
            b = self._bind(sym, params, param_names, xs, names, train, grad_names, input_grads,
                           ids)
            self.bound[key] = b
            while len(self.bound) > _MAX_BOUND:
                self.bound.pop(next(iter(self.bound)))
        ex = b.executor
        b.generation = next(self._counter)
        outs = ex.forward(is_train=bool(train), **dict(zip(names, xs)))
        # The bound outputs are overwritten by the next run: hand out copies (pushed, cheap).
        outs = [o.copy() for o in outs]
        if needs_grad:
            self._record(b, params, xs, names, grad_names, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _bind(self, sym, params, param_names, xs, names, train, grad_names, input_grads, ids):
        grad_req = {n: "write" if g else "null" for n, g in zip(names, input_grads)}
        for p in param_names:
            grad_req[p] = "write" if p in grad_names else "null"
        args = {p: params[p].detach() for p in param_names}
        aux = {p: params[p].detach() for p in self.aux}
        shapes = {n: tuple(x.shape) for n, x in zip(names, xs)}
        dtypes = {n: x.dtype for n, x in zip(names, xs)}
        ex = sym.bind(args=args, aux=aux, shapes=shapes, dtypes=dtypes, grad_req=grad_req,
                      fuse=self.fuse and not train and not grad_names and not any(input_grads))
        return _Bound(ex, ids, grad_names, input_grads)

    def _record(self, b, params, xs, names, grad_names, outs):
        generation = b.generation
        layer_name = self.layer.name
        inputs = list(xs) + [params[p] for p in grad_names]

        def backward(out_grads):
            if b.generation != generation:
                raise _weft.WeftError(
                    f"hybridized '{layer_name}': backward of a call after the same bound graph "
                    f"ran forward again; call backward() before the next forward with these "
                    f"shapes (or use the imperative path)")
            b.executor.backward(list(out_grads))
            grads = b.executor.grad_dict
            result = [grads[n] if g else None for n, g in zip(names, b.input_grads)]
            result += [grads[p] for p in grad_names]
            return result

        autograd._ag.record_function(f"hybridized {layer_name}", inputs, outs, backward)
