"""Combinators: layers made of layers."""
from __future__ import annotations

from .layer import Layer

__all__ = ["Sequential", "Residual", "Concat", "Parallel", "Lambda"]


class Sequential(Layer):
    """Applies its layers in order, each to the previous one's output."""

    prefix = "sequential"

    def __init__(self, *layers, name=None):
        super().__init__(name)
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        self.layers = list(layers)
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, not a Layer")

    def add(self, *layers):
        """Appends layers; returns self."""
        self.layers.extend(layers)
        return self

    def children(self):
        return list(self.layers)

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

    def forward(self, ctx, *xs):
        out = xs[0] if len(xs) == 1 else xs
        for layer in self.layers:
            out = layer.forward(ctx, *out) if isinstance(out, tuple) else layer.forward(ctx, out)
        return out


class Residual(Layer):
    """``block(x) + shortcut(x)``; the shortcut is the identity unless given (a projection such
    as a strided 1x1 convolution). ``activation`` is applied after the sum."""

    prefix = "residual"

    def __init__(self, block, shortcut=None, activation=None, name=None):
        super().__init__(name)
        self.block, self.shortcut, self.activation = block, shortcut, activation

    def children(self):
        return [self.block] + ([self.shortcut] if self.shortcut is not None else [])

    def forward(self, ctx, x):
        y = self.block.forward(ctx, x)
        s = self.shortcut.forward(ctx, x) if self.shortcut is not None else x
        out = ctx.op(self, "elemwise_add", y, s, suffix="_add")
        if self.activation:
            out = ctx.op(self, "Activation", out, act_type=self.activation, suffix="_act")
        return out


class Parallel(Layer):
    """Applies every branch to the same input; returns their outputs as a tuple."""

    prefix = "parallel"

    def __init__(self, branches, name=None):
        super().__init__(name)
        self.branches = list(branches)

    def children(self):
        return list(self.branches)

    def forward(self, ctx, x):
        return tuple(b.forward(ctx, x) for b in self.branches)


class Concat(Layer):
    """Applies every branch to the same input and concatenates the outputs along ``axis``
    (Inception's blocks)."""

    prefix = "concat"

    def __init__(self, branches, axis=1, name=None):
        super().__init__(name)
        self.branches, self.axis = list(branches), int(axis)

    def children(self):
        return list(self.branches)

    def forward(self, ctx, x):
        outs = [b.forward(ctx, x) for b in self.branches]
        return ctx.op(self, "Concat", *outs, dim=self.axis, num_args=len(outs))


class Lambda(Layer):
    """A function of the inputs without parameters. ``fn(F, *xs)`` gets the operator namespace
    (``weft.op`` imperatively, ``weft.sym`` when traced), so the same function hybridizes::

        Lambda(lambda F, x: F.clip(x, a_min=0, a_max=6))
    """

    prefix = "lambda"

    def __init__(self, fn, name=None):
        super().__init__(name)
        self.fn = fn

    def forward(self, ctx, *xs):
        from .. import op, sym
        return self.fn(sym if ctx.symbolic else op, *xs)
