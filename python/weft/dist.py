"""weft.dist: collectives across processes, for data-parallel training.

Start one process per worker with ``mpirun`` (or any launcher MPI understands); each joins the
group with :func:`init` and learns its :func:`rank` among :func:`size` processes. A process
started alone is a group of one, where every collective is a copy::

    # mpirun -np 4 python train.py
    import weft, weft.dist as dist
    dist.init()
    x = weft.full((1024,), float(dist.rank()))
    dist.allreduce(x, op="sum")          # in place; returns before it runs
    print(x.asnumpy()[0])                # 0+1+2+3 = 6.0 on every rank

Collectives are asynchronous engine operations, like every weft operation: they return at once,
run when their input is ready, and whatever reads the output waits for them. An error (a rank
that stopped answering, ranks that disagree on a tensor's shape) is raised as :class:`DistError`
where the output is read (``asnumpy()``, ``wait_to_read()``), naming the tensor and the ranks.

Every rank must issue the same collectives, but not necessarily in the same order: they are
matched by ``name`` (when left empty, ``"<kind>.<n>"`` counted per rank in program order, so
give names when ranks issue collectives in different orders). Ready allreduces are fused into
buffers of up to ``fusion_bytes`` bytes and reduced by one transport call.

Arrays on ``cuda:N`` go over NCCL in builds that have it (docs/DISTRIBUTED.md, "GPU arrays over
NCCL"; never run on a GPU yet): one GPU per process, ``cuda:<local_rank()>``, and all arrays of a
call on the same device.

For training, ``weft.nn.Trainer(..., distributed=True)`` broadcasts the parameters from rank 0
and averages gradients after each backward; :func:`allreduce_gradients` and
:func:`broadcast_parameters` are the pieces it uses. Environment: ``WEFT_DIST_TIMEOUT``
(seconds), ``WEFT_DIST_FUSION_BYTES``, ``WEFT_DIST_CYCLE_MS``.
"""
from __future__ import annotations

import atexit as _atexit

from ._weft import NDArray
from ._weft import dist as _native
from .ndarray import asarray

__all__ = [
    "DistError", "OPS", "allgather", "allreduce", "allreduce_gradients", "backend", "barrier",
    "broadcast", "broadcast_parameters", "init", "initialized", "local_rank", "local_size",
    "rank", "reduce_scatter", "shutdown", "size", "stats",
]

DistError = _native.DistError
"""A collective failed across processes (a subclass of weft.WeftError)."""

OPS = ("sum", "mean", "max", "min", "prod")
"""The reduction operations: ``mean`` is the sum divided by the group size."""


def _op(op):
    name = str(op).lower()
    if name not in OPS:
        raise ValueError(f"weft.dist: unknown reduction {op!r}; expected one of {', '.join(OPS)}")
    return name


def _array(x, what):
    if isinstance(x, NDArray):
        return x
    try:
        return asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"weft.dist.{what}: expected a weft.NDArray or an array-like, "
                        f"got {type(x).__name__}") from e


def _pairs(items, what):
    pairs = list(items.items()) if hasattr(items, "items") else list(items)
    out = []
    for item in pairs:
        name, x = item
        if not isinstance(x, NDArray):
            raise TypeError(f"weft.dist.{what}: {name!r} is a {type(x).__name__}, "
                            "not a weft.NDArray (it is updated in place)")
        out.append((str(name), x))
    return out


def init(timeout=None, fusion_bytes=None, cycle_ms=None):
    """Joins the process group; a second call with the group up does nothing.

    ``timeout``: seconds a collective waits for every rank before it fails with DistError.
    ``fusion_bytes``: the largest fused allreduce buffer (0: no fusion). ``cycle_ms``: how long
    rank 0 gathers ready collectives before starting them. None takes each from the environment
    (``WEFT_DIST_TIMEOUT``, ``WEFT_DIST_FUSION_BYTES``, ``WEFT_DIST_CYCLE_MS``) or the default
    (60 s, 64 MiB, 1 ms). The settings are fixed for the life of the process."""
    _native.init(timeout=None if timeout is None else float(timeout),
                 fusion_bytes=None if fusion_bytes is None else int(fusion_bytes),
                 cycle_ms=None if cycle_ms is None else float(cycle_ms))


def initialized() -> bool:
    """Whether :func:`init` was called and :func:`shutdown` was not."""
    return _native.initialized()


def shutdown():
    """Waits for this process's collectives and leaves the group. Called at exit when the
    program did not; the group cannot be joined again afterwards in the same process."""
    _native.shutdown()


def rank() -> int:
    """This process's rank, 0 to size()-1."""
    return _native.rank()


def size() -> int:
    """The number of processes in the group."""
    return _native.size()


def local_rank() -> int:
    """This process's rank among the group's processes on this host."""
    return _native.local_rank()


def local_size() -> int:
    """The number of the group's processes on this host."""
    return _native.local_size()


def backend() -> str:
    """The transport, e.g. ``'mpi (Open MPI 4.1.4)'`` or ``'single process'``."""
    return _native.backend()


def allreduce(x, out=None, op="sum", name="", priority=0) -> NDArray:
    """``out`` = ``op`` over ranks of ``x`` (``"sum"``, ``"mean"``, ``"max"``, ``"min"``,
    ``"prod"``); returns ``out``. Without ``out`` the result is written into ``x`` when it is an
    NDArray, or into a new array when ``x`` is a NumPy array or list. ``name`` matches this
    allreduce across ranks; ``priority``: higher starts first among those ready at once."""
    x = _array(x, "allreduce")
    return _native.allreduce(x, out, _op(op), str(name), int(priority))


def broadcast(x, root=0, name="", priority=0) -> NDArray:
    """``x`` on every rank becomes ``root``'s; returns it (a new array for NumPy input)."""
    x = _array(x, "broadcast")
    return _native.broadcast(x, int(root), str(name), int(priority))


def allgather(x, out=None, name="", priority=0) -> NDArray:
    """The ranks' ``x`` concatenated along axis 0 in rank order; every rank's ``x`` has the same
    shape. Without ``out`` a new array of shape ``(size() * x.shape[0], *x.shape[1:])``."""
    x = _array(x, "allgather")
    return _native.allgather(x, out, str(name), int(priority))


def reduce_scatter(x, out=None, op="sum", name="", priority=0) -> NDArray:
    """Reduces ``x`` over ranks and gives rank r the r-th of size() equal slices along axis 0.
    Without ``out`` a new array of shape ``(x.shape[0] // size(), *x.shape[1:])``; ``x.shape[0]``
    must be a multiple of size()."""
    x = _array(x, "reduce_scatter")
    return _native.reduce_scatter(x, out, _op(op), str(name), int(priority))


def barrier(name=""):
    """Blocks until every rank has reached its matching barrier. Raises DistError when one does
    not within the timeout."""
    _native.barrier(str(name))


def allreduce_gradients(grads):
    """Averages gradients over ranks, in place. ``grads``: (name, NDArray) pairs or a dict, in
    the order backward produces them (the last layer's first) so that each reduction starts as
    soon as its gradient is written; the first layers' gradients, needed first by the next
    step, get the highest priority. Names must be the same on every rank."""
    _native.allreduce_gradients(_pairs(grads, "allreduce_gradients"))


def broadcast_parameters(params, root=0):
    """Makes every rank's parameters equal to ``root``'s, in place. ``params``: (name, NDArray)
    pairs or a dict (e.g. a ``weft.nn.Parameters``)."""
    _native.broadcast_parameters(_pairs(params, "broadcast_parameters"), int(root))


def stats() -> dict:
    """Counters of this process's coordination: ``collectives`` completed, ``fused_batches``
    (transport calls that carried more than one allreduce), ``transport_calls``,
    ``bytes_reduced`` (allreduce payload) and negotiation ``cycles``."""
    return _native.stats()


def _shutdown_at_exit():
    # While the interpreter is still whole (before the native library's own exit handler).
    # A group already broken by a failure reports it on stderr; exit goes on.
    try:
        if _native.initialized():
            _native.shutdown()
    except Exception as e:  # noqa: BLE001
        import sys
        print(f"weft.dist: shutdown at exit failed: {e}", file=sys.stderr)


_atexit.register(_shutdown_at_exit)
