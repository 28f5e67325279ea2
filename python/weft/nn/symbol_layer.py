"""Loaded graphs as layers: ``import_model`` reads an MXNet checkpoint (``Layer.export``'s or
MXNet's own) into a ``SymbolLayer``."""
from __future__ import annotations

from .. import graph
from .hybrid import CachedGraph
from .layer import Layer, Parameters

__all__ = ["import_model", "SymbolLayer"]


class SymbolLayer(Layer):
    """A layer whose graph is a loaded symbol (MXNet's SymbolBlock). It always runs bound (it
    is hybridized from the start), on its own or under autograd; it cannot be traced into a
    larger graph."""

    prefix = "symbol"

    def __init__(self, symbol, input_names=("data",), name=None):
        super().__init__(name)
        args = symbol.list_arguments()
        for n in input_names:
            if n not in args:
                raise ValueError(f"SymbolLayer: input '{n}' is not an argument of the symbol "
                                 f"(arguments: {', '.join(args)})")
        self._symbol = symbol
        self._inputs = list(input_names)
        self.hybridize()

    def input_names(self, n):
        if n != len(self._inputs):
            raise ValueError(f"SymbolLayer: called with {n} inputs, the graph has "
                             f"{len(self._inputs)} ({', '.join(self._inputs)})")
        return list(self._inputs)

    def symbol(self, num_inputs=1):
        self.input_names(num_inputs)
        return self._symbol

    def hybridize(self, active=True, fuse=True):
        self._hybrid = CachedGraph(self, fuse=fuse)  # a loaded graph has no imperative path
        return self

    def forward(self, ctx, *xs):
        raise NotImplementedError("SymbolLayer: a loaded graph cannot be traced into a larger "
                                  "model; apply it on its own and feed its outputs on")


def import_model(prefix, epoch=0, input_names=("data",), device=None):
    """Loads ``<prefix>-symbol.json`` and ``<prefix>-<epoch:04d>.params`` (written by
    ``export`` or by MXNet). Returns ``(layer, params)`` for ``layer.apply(params, x)``."""
    sym, arg_params, aux_params = graph.load_checkpoint(prefix, epoch, device)
    params = Parameters({**arg_params, **aux_params}, aux_names=aux_params.keys())
    return SymbolLayer(sym, input_names), params
