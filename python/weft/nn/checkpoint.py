"""Export to MXNet's checkpoint format."""
from __future__ import annotations

import os

from .. import graph

__all__ = ["export"]


def export(layer, params, prefix, epoch=0, num_inputs=1):
    """Writes ``<prefix>-symbol.json`` and ``<prefix>-<epoch:04d>.params`` (``arg:`` and
    ``aux:`` names, as ``mx.model.save_checkpoint`` writes). Returns the two paths."""
    if params is None:
        raise ValueError(f"export: {type(layer).__name__} has no parameters: pass params= or "
                         f"initialize the model and call it once")
    sym = layer.symbol(num_inputs)
    inputs = set(layer.input_names(num_inputs))
    wanted = [n for n in sym.list_arguments() if n not in inputs] + sym.list_auxiliary_states()
    missing = [n for n in wanted if n not in params]
    if missing:
        raise KeyError(f"export: parameters missing: {', '.join(missing)}")
    aux = set(sym.list_auxiliary_states())
    prefix = os.fspath(prefix)
    graph.save_checkpoint(prefix, epoch, sym, {n: params[n] for n in wanted if n not in aux},
                          {n: params[n] for n in wanted if n in aux})
    return f"{prefix}-symbol.json", f"{prefix}-{epoch:04d}.params"
