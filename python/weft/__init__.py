"""weft: an asynchronous dataflow engine for deep learning, from Python.

Arrays are imperative and asynchronous: every operation pushes work onto weft's dependency
engine and returns before it runs; ``asnumpy()``, ``item()`` and ``wait_to_read()`` wait. An error
raised by a kernel surfaces at the next wait on the array it wrote, once.

    >>> import weft
    >>> x = weft.array([[1, 2], [3, 4]])
    >>> y = (x * 2 + 1).sum()
    >>> y.item()
    24.0

Modules: ``weft.op`` (every registered operator), ``weft.autograd``, ``weft.graph`` and
``weft.sym`` (MXNet graphs), ``weft.random``, ``weft.profiler``, ``weft.data`` (input pipelines).
"""
import os as _os
import sys as _sys

if _os.environ.get("WEFT_NATIVE_DIR"):
    # Development: the extension from a build folder (cmake -S python -B DIR), not the package.
    _sys.path.insert(0, _os.environ["WEFT_NATIVE_DIR"])
    import _weft as _native  # noqa: E402

    _sys.modules[__name__ + "._weft"] = _native
    del _sys.path[0]

from . import _weft  # noqa: E402
from ._weft import (  # noqa: E402
    Device,
    EngineError,
    NDArray,
    ShapeError,
    WeftError,
    arange,
    cpu,
    cuda,
    cuda_available,
    empty,
    from_dlpack,
    full,
    load_plugin,
    ones,
    seed,
    waitall,
    zeros,
)
from .ndarray import array, asarray, zeros_like, ones_like, concat, stack, load, save
from . import op, autograd, random, profiler, graph, sym, data
from .graph import model
from .register import load_plugin, register_op  # noqa: F811 - refreshes weft.op

__version__ = _weft.version()

__all__ = [
    "Device", "EngineError", "NDArray", "ShapeError", "WeftError", "arange", "array", "asarray",
    "autograd", "concat", "cpu", "cuda", "cuda_available", "data", "empty", "from_dlpack", "full",
    "graph", "load", "load_plugin", "model", "ones", "ones_like", "op", "profiler", "random",
    "register_op", "save", "seed", "stack", "sym", "waitall", "zeros", "zeros_like",
]


def _drain_at_exit():
    # Operators written in Python run on engine workers and need the interpreter: let queued work
    # finish while it is still alive. Errors nobody waited for are not raised at exit.
    try:
        waitall()
    except Exception:  # noqa: BLE001 - reported by the engine on stderr already
        pass


import atexit as _atexit

_atexit.register(_drain_at_exit)
