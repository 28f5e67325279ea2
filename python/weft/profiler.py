"""The profiler: records every engine operation (and allocator counters) between start() and
stop(path), and writes a Chrome trace that opens in https://ui.perfetto.dev."""
from __future__ import annotations

import contextlib

from . import _weft


def start():
    """Starts recording (events from earlier runs are dropped)."""
    _weft._profiler_clear()
    _weft._profiler_start()


def stop(path=None):
    """Waits for pushed work, stops recording and, when `path` is given, writes the trace there.
    Returns the number of events recorded."""
    try:
        _weft.waitall()  # may raise EngineError for failed operations: stop and write anyway
    finally:
        _weft._profiler_stop()
        if path is not None:
            _weft._profiler_dump(str(path))
    return _weft._profiler_event_count()


@contextlib.contextmanager
def profile(path):
    """Records the operations of this scope into the trace `path`."""
    start()
    try:
        yield
    finally:
        stop(path)
