"""Static graphs, MXNet style: symbols loaded from ``-symbol.json`` files or composed with
``weft.sym``, parameters in MXNet's ``.params`` files, and executors that run them.

    >>> net = weft.graph.load("resnet-18-symbol.json")
    >>> arg_params, aux_params = weft.graph.load_params("resnet-18-0000.params")
    >>> ex = net.bind(args=arg_params, aux=aux_params, shapes={"data": (1, 3, 224, 224)})
    >>> probs = ex.forward(data=image)[0].asnumpy()

``Symbol.bind`` plans memory once; ``Executor.forward`` copies the inputs it is given into the
bound arrays and pushes the whole graph, returning before it runs.
"""
from __future__ import annotations

import os

from . import _weft
from ._weft import Executor, Symbol

__all__ = ["Executor", "Symbol", "load", "load_json", "load_params", "save_params",
           "load_checkpoint", "save_checkpoint", "model", "model_names"]


def load(path) -> Symbol:
    """Reads an MXNet symbol JSON file (``<prefix>-symbol.json``, any MXNet version's layout)."""
    return Symbol.load(os.fspath(path))


def load_json(text: str) -> Symbol:
    """Parses MXNet symbol JSON text."""
    return Symbol.from_json(text)


def load_params(path, device=None):
    """Reads an MXNet ``.params`` file of ``arg:NAME`` / ``aux:NAME`` arrays.

    Returns ``(arg_params, aux_params)``, two dicts of name -> NDArray. Names without a prefix
    (files written by Gluon's ``save_parameters``) count as arguments."""
    loaded = _weft._load(os.fspath(path), device)
    if isinstance(loaded, list):
        if loaded:
            raise ValueError(f"load_params: {os.fspath(path)} holds a list of {len(loaded)} "
                             f"arrays, not named parameters")
        return {}, {}
    arg_params, aux_params = {}, {}
    for key, value in loaded.items():
        kind, sep, name = key.partition(":")
        if sep and kind == "aux":
            aux_params[name] = value
        elif sep and kind == "arg":
            arg_params[name] = value
        else:
            arg_params[key] = value
    return arg_params, aux_params


def save_params(path, arg_params, aux_params=None):
    """Writes ``arg_params`` and ``aux_params`` (dicts of name -> NDArray) as an MXNet
    ``.params`` file with ``arg:`` / ``aux:`` names, which ``mx.nd.load`` and
    ``mx.model.load_checkpoint`` read. Waits for pending writes of the arrays first."""
    data = {f"arg:{k}": v for k, v in (arg_params or {}).items()}
    data.update({f"aux:{k}": v for k, v in (aux_params or {}).items()})
    _weft._save(os.fspath(path), data)


def load_checkpoint(prefix, epoch, device=None):
    """MXNet's checkpoint pair: ``<prefix>-symbol.json`` and ``<prefix>-<epoch:04d>.params``.
    Returns ``(symbol, arg_params, aux_params)``."""
    prefix = os.fspath(prefix)
    sym = load(f"{prefix}-symbol.json")
    arg_params, aux_params = load_params(f"{prefix}-{epoch:04d}.params", device)
    return sym, arg_params, aux_params


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params=None):
    """Writes ``<prefix>-symbol.json`` and ``<prefix>-<epoch:04d>.params`` as MXNet does."""
    prefix = os.fspath(prefix)
    symbol.save(f"{prefix}-symbol.json")
    save_params(f"{prefix}-{epoch:04d}.params", arg_params, aux_params)


def model(name, batch=1):
    """A model weft builds itself (see ``model_names()``): ``(symbol, input_shapes)`` with the
    shapes of its inputs (data, label, initial states) at batch size ``batch``.

        >>> net, shapes = weft.model("resnet18", batch=8)
        >>> ex = net.bind(shapes=shapes)
    """
    return _weft._model(str(name), int(batch))


def model_names():
    """The names ``model()`` knows."""
    return _weft._model_names()


def _simple_bind(self, device=None, grad_req="null", fuse=True, **shapes):
    """MXNet's simple_bind: binds with every array allocated, from input shapes by name."""
    return self.bind(device=device, grad_req=grad_req, shapes=shapes, fuse=fuse)


def _executor_repr(self):
    shapes = ", ".join(str(s) for s in self.output_shapes)
    return f"<Executor outputs: {shapes}>"


Symbol.simple_bind = _simple_bind
Executor.__repr__ = _executor_repr
Executor.arg_arrays = property(lambda self: list(self.arg_dict.values()),
                               doc="Bound argument arrays, in list_arguments() order.")
Executor.aux_arrays = property(lambda self: list(self.aux_dict.values()),
                               doc="Bound auxiliary states, in list_auxiliary_states() order.")
