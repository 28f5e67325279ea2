"""The layer core: a model is a tree of layers with two pure pieces, ``init`` (parameters from
input shapes) and ``apply`` (outputs from parameters and inputs), plus a stateful convenience
(``initialize`` then ``model(x)``) and ``hybridize`` (trace once to a graph, run it bound).

A layer writes one ``forward(ctx, *inputs)`` against a context that is either imperative (arrays,
``weft.op``) or symbolic (``weft.sym``); ``ctx.op`` and ``ctx.param`` hide the difference, so the
same code gives the eager path, the traced graph (for shape inference, hybridize and export) and
their agreement by construction.
"""
from __future__ import annotations

import numpy as np

from .. import _weft, autograd
from .. import op as _op
from .. import sym as _sym
from ..ndarray import asarray
from . import init as _init
from .checkpoint import export as _export
from .hybrid import CachedGraph
from .shapes import input_names as _input_names
from .shapes import input_shapes
from .summary import summary as _summary

__all__ = ["Layer", "Parameters", "Context"]


class Parameters(dict):
    """A model's parameters: a dict of name -> NDArray (MXNet's names, e.g. ``dense0_weight``),
    auxiliary states included (BatchNorm's moving statistics, updated in place in training).
    ``aux_names`` says which entries are auxiliary; ``trainable()`` gives the rest."""

    def __init__(self, *args, aux_names=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.aux_names = frozenset(aux_names)

    def trainable(self):
        """The learned parameters (auxiliary states left out), in insertion order."""
        return {k: v for k, v in self.items() if k not in self.aux_names}

    def auxiliary(self):
        """The auxiliary states."""
        return {k: v for k, v in self.items() if k in self.aux_names}

    def attach_grad(self, grad_req="write"):
        """attach_grad on every trainable parameter; returns self."""
        for v in self.trainable().values():
            v.attach_grad(grad_req)
        return self

    def count(self):
        """The number of trainable scalars."""
        return int(sum(int(np.prod(v.shape)) for v in self.trainable().values()))

    def copy(self):
        """A deep copy (new arrays)."""
        return Parameters({k: v.copy() for k, v in self.items()}, aux_names=self.aux_names)


class Context:
    """What ``forward`` runs against. ``symbolic`` tells which; ``train`` the mode."""

    def __init__(self, symbolic, params=None, train=False):
        self.symbolic = symbolic
        self.params = params
        self.train = train

    def param(self, layer, suffix):
        """The parameter ``<layer.name>_<suffix>``: a variable when tracing, the array otherwise."""
        name = f"{layer.name}_{suffix}"
        if self.symbolic:
            return _sym.Variable(name)
        try:
            return self.params[name]
        except KeyError:
            have = ", ".join(sorted(self.params)) or "none"
            raise KeyError(f"{type(layer).__name__} '{layer.name}': parameter '{name}' is missing "
                           f"from params (have: {have}); were they made by this model's init?") \
                from None

    def op(self, layer, op_name, *inputs, suffix="", **attrs):
        """Applies operator ``op_name``. Traced nodes are named after the layer (plus ``suffix``
        when a layer applies several ops), so the layer's output is ``<name>_output``."""
        if self.symbolic:
            return getattr(_sym, op_name)(*inputs, name=f"{layer.name}{suffix}", **attrs)
        return getattr(_op, op_name)(*inputs, **attrs)


class Layer:
    """A layer, or a combination of layers (subclasses define ``forward``; combinators also
    ``children``). Parameters are not held by the layer unless ``initialize`` is used."""

    prefix = "layer"  # automatic names: <prefix><n>, counted per model in tree order

    def __init__(self, name=None):
        self.name = name
        self._params = None
        self._init_seed = None
        self._hybrid = None

    # ---- structure ------------------------------------------------------------------------------
    def children(self):
        """The layers this one applies (combinators override)."""
        return []

    def param_inits(self):
        """Initializers by parameter suffix (``{"weight": Xavier()}``); others follow the
        defaults by suffix (bias, beta, moving_mean: zeros; gamma, moving_var: ones)."""
        return {}

    def forward(self, ctx, *inputs):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def input_names(self, n):
        """Names of the traced graph's inputs: ``data`` (one input) or ``data0``, ``data1``..."""
        return _input_names(n)

    def walk(self):
        """This layer and every layer below it, depth first, each once."""
        seen, order = set(), []

        def visit(layer):
            if id(layer) in seen:
                return
            seen.add(id(layer))
            order.append(layer)
            for c in layer.children():
                visit(c)

        visit(self)
        return order

    def _name_tree(self):
        counts = {}
        for layer in self.walk():
            if layer.name is None:
                n = counts.get(layer.prefix, 0)
                while any(other.name == f"{layer.prefix}{n}" for other in self.walk()):
                    n += 1
                layer.name = f"{layer.prefix}{n}"
                counts[layer.prefix] = n + 1

    # ---- tracing --------------------------------------------------------------------------------
    def symbol(self, num_inputs=1):
        """The model as a ``weft.sym`` graph with inputs ``data`` (or ``data0``, ``data1``...)."""
        self._name_tree()
        names = self.input_names(num_inputs)
        xs = [_sym.Variable(n) for n in names]
        with _sym.name_scope():
            out = self.forward(Context(True), *xs)
        if isinstance(out, (list, tuple)):
            out = _sym.Group(list(out))
        return out

    # ---- init / apply ---------------------------------------------------------------------------
    def init(self, inputs, seed=0, dtype="float32", device=None):
        """Creates the parameters for inputs of the given shapes (``(None, 3, 32, 32)``; None or
        0 marks a deferred dimension such as the batch), or like the given example arrays.
        Parameter shapes come from the graph's shape inference, so layers need no input widths.
        Deterministic for a seed. Returns a ``Parameters`` dict."""
        shapes = input_shapes(inputs)
        net = self.symbol(len(shapes))
        names = self.input_names(len(shapes))
        # Parameter shapes do not depend on deferred dimensions: infer with 1 there.
        concrete = {n: tuple(1 if not d else int(d) for d in s) for n, s in zip(names, shapes)}
        arg_shapes, _, aux_shapes = net.infer_shape(**concrete)
        inits = self._collect_inits()
        params = Parameters(aux_names=net.list_auxiliary_states())
        entries = list(zip(net.list_arguments(), arg_shapes))
        entries += list(zip(net.list_auxiliary_states(), aux_shapes))
        for name, shape in entries:
            if name in concrete:
                continue
            init = inits.get(name) or _init.default_for(name)
            # Note [One initialiser] (nn/init.h): the values nn::init gives in C++.
            value = _init.initial_values(init, shape, seed, name)
            params[name] = _weft_array(value, dtype, device)
        return params

    def _collect_inits(self):
        out = {}
        for layer in self.walk():
            for suffix, init in layer.param_inits().items():
                out[f"{layer.name}_{suffix}"] = _init.create(init)
        return out

    def apply(self, params, *inputs, train=False):
        """The outputs for ``inputs`` with ``params``. ``train``: training mode (Dropout masks,
        BatchNorm batch statistics, which also updates the moving statistics in ``params`` in
        place, as MXNet does). Under ``weft.autograd.record()`` the computation is recorded, so
        gradients reach the parameters that have ``attach_grad``."""
        self._name_tree()
        xs = [x if isinstance(x, _weft.NDArray) else asarray(x) for x in inputs]
        if self._hybrid is not None:
            return self._hybrid.run(params, xs, train)
        scope = autograd.train_mode() if train else autograd.predict_mode()
        with scope:
            return self.forward(Context(False, params, train), *xs)

    # ---- the stateful convenience ---------------------------------------------------------------
    def initialize(self, seed=0, inputs=None, dtype="float32"):
        """Gluon's style: parameters held by the model, created now from ``inputs`` (shapes or
        examples) or at the first call, with gradients attached. Returns self."""
        self._init_seed = (seed, dtype)
        self._params = None
        if inputs is not None:
            self._params = self.init(inputs, seed=seed, dtype=dtype).attach_grad()
        return self

    @property
    def params(self):
        """The parameters ``initialize`` created (None until the first call when deferred)."""
        return self._params

    @params.setter
    def params(self, value):
        self._params = value

    def __call__(self, *inputs):
        if self._params is None:
            if self._init_seed is None:
                raise RuntimeError(f"{type(self).__name__}: call initialize() first, or use "
                                   f"init() and apply() with explicit parameters")
            seed, dtype = self._init_seed
            self._params = self.init(list(inputs), seed=seed, dtype=dtype).attach_grad()
        return self.apply(self._params, *inputs, train=autograd.is_training())

    # ---- hybridize ------------------------------------------------------------------------------
    def hybridize(self, active=True, fuse=True):
        """Runs the model as one bound graph from the next call on: traced once, bound per input
        shape (a new batch size binds again; bound executors are kept), with the memory plan and
        inference fusion. Outputs and gradients equal the imperative path's. Returns self."""
        self._hybrid = CachedGraph(self, fuse=fuse) if active else None
        return self

    # ---- export ---------------------------------------------------------------------------------
    def export(self, prefix, params=None, epoch=0, num_inputs=1):
        """Writes ``<prefix>-symbol.json`` and ``<prefix>-<epoch:04d>.params`` in MXNet's format
        (``mx.sym.load`` and ``mx.nd.load`` read them; inputs are named ``data``). Returns the
        two paths."""
        return _export(self, params if params is not None else self._params, prefix, epoch,
                       num_inputs)

    def summary(self, inputs, params=None):
        """A table of layers, output shapes and parameter counts (a string)."""
        return _summary(self, inputs, params)

    def __repr__(self):
        kids = self.children()
        head = f"{type(self).__name__}({self._describe()})"
        if not kids:
            return head
        body = "\n".join("  " + repr(k).replace("\n", "\n  ") for k in kids)
        return f"{head[:-1]}\n{body}\n)" if head.endswith("()") else f"{head}\n{body}"

    def _describe(self):
        return f"name={self.name!r}" if self.name else ""


def _weft_array(value, dtype, device):
    from ..ndarray import array
    return array(np.asarray(value), dtype=dtype, device=device)
