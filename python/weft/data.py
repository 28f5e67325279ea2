"""weft.data: lazy, composable input pipelines over weft's C++ data layer (``data/``).

A :class:`Dataset` describes a pipeline; nothing runs until it is iterated. Sources make one
(:func:`from_arrays`, :func:`range`, :func:`from_generator`, :func:`npy_files`,
:func:`recordio`, :func:`image_folder`), transforms return a new one (``map``, ``filter``,
``shuffle``, ``batch``, ``padded_batch``, ``repeat``, ``take``, ``skip``, ``shard``,
``interleave``, ``cache``, ``prefetch``, ``ignore_errors``)::

    import weft.data as wd
    ds = (wd.image_folder("train")
          .shuffle(10_000, seed=0)
          .map(wd.compose(wd.decode_image(), wd.random_crop(224, 224),
                          wd.random_flip_left_right(), wd.to_tensor()), num_parallel=8, seed=0)
          .batch(64, drop_remainder=True)
          .prefetch(4))
    for images, labels in ds.iterate(progress=True):
        ...

An element is a tuple of weft NDArrays (a single NDArray when it has one component).
Transforms written in C++ (the image transforms) run on the engine's CPU workers; Python map
functions run on the map's own threads and take the GIL only for the call, and iteration releases
the GIL while it waits, so Python threads and the pipeline run side by side. A failure of a stage
on one element raises :class:`DataError` at the consumer, naming the element's index and origin.
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import sys
import time
import traceback
import weakref

import numpy as np

from . import _weft
from ._weft import NDArray

__all__ = [
    "DataError", "Dataset", "INFINITE", "Iterator", "IteratorStats", "RecordIOWriter",
    "Transform", "UNKNOWN", "center_crop", "compose", "decode_image", "decode_image_bytes",
    "encode_jpeg", "encode_png", "from_arrays", "from_generator", "image_folder",
    "image_folder_classes", "normalize", "npy_files", "random_crop", "random_flip_left_right",
    "range", "recordio", "resize", "to_tensor",
]

DataError = _weft.DataError
#: cardinality() of a dataset that never ends (repeat() without a count).
INFINITE = _weft._DATA_INFINITE
#: cardinality() of a dataset whose size is not known without reading it (filter, generators).
UNKNOWN = _weft._DATA_UNKNOWN

#: A map function implemented in weft (the image transforms, compose of them) or wrapping a
#: Python function. Usable in Dataset.map, and callable: ``t(*arrays, seed=0)`` runs it now.
Transform = _weft._Transform

_U64 = (1 << 64) - 1


def _seed(seed):
    return None if seed is None else int(seed) & _U64


def _path(p):
    return os.fspath(p) if p is not None else ""


def _function_name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__


def _as_transform(fn, name=None, rng=False):
    if isinstance(fn, Transform):
        if rng:
            raise ValueError("map(rng=True) is for Python functions; weft's transforms draw "
                             "from the element's generator themselves")
        return fn
    if not callable(fn):
        raise TypeError(f"expected a weft.data.Transform or a callable, got "
                        f"{type(fn).__name__}")
    return _weft._data_python_transform(fn, name or _function_name(fn), bool(rng))


def _format_exception(exc_type, exc, tb):
    """The message of a Python function's exception inside a pipeline: "Type: message" and the
    innermost frames of its traceback."""
    message = f"{getattr(exc_type, '__name__', exc_type)}: {exc}"
    frames = traceback.extract_tb(tb)[-3:] if tb is not None else []
    if frames:
        message += ("\nTraceback (innermost frames):\n" +
                    "".join(traceback.format_list(frames)).rstrip("\n"))
    return message


class Dataset:
    """A lazy, immutable input pipeline. Every transform returns a new Dataset and leaves this
    one unchanged; copies are cheap. Iterating (``for x in ds``, :meth:`iterate`) starts a pass.
    Thread-safe: several passes may run at once, from any threads."""

    __slots__ = ("_native", "_batched")

    def __init__(self, native, batched=False):
        self._native = native
        self._batched = batched  # elements are batches: throughput counts their rows

    def _derive(self, native, batched=None):
        return Dataset(native, self._batched if batched is None else batched)

    # ---- transforms ------------------------------------------------------------------------

    def map(self, fn, num_parallel=1, *, deterministic=True, seed=None, rng=False, name=None):
        """Applies `fn` to every element, `num_parallel` elements at a time.

        `fn` is a :class:`Transform` (``decode_image()``, ``compose(...)``: runs on the engine's
        CPU workers) or a Python callable, called as ``fn(*arrays)`` with the element's
        components as CPU NDArrays (``fn(x)`` for a one-component element) on the map's own
        threads, holding the GIL only for the call. It returns an NDArray, a NumPy array,
        anything ``numpy.asarray`` takes, or a tuple of those (one component each); results are
        made CPU arrays (NumPy's dtype is kept). With ``rng=True`` it is also given
        ``rng=``, a ``numpy.random.Generator`` drawn from the element's own generator: with a
        `seed`, random transforms give the same results for every `num_parallel`.
        `deterministic=False` returns elements as they finish instead of in order. An exception
        raised by `fn` becomes a :class:`DataError` at the consumer."""
        t = _as_transform(fn, name, rng)
        return self._derive(self._native.map(t, int(num_parallel), bool(deterministic),
                                             _seed(seed)))

    def filter(self, pred, name=None):
        """Keeps the elements for which ``pred(*arrays)`` is true (a bool, or a one-element
        array). Runs on the thread that pulls elements (the consumer or a prefetcher)."""
        if not callable(pred):
            raise TypeError(f"filter: expected a callable, got {type(pred).__name__}")
        return self._derive(self._native.filter(pred, name or _function_name(pred)))

    def shuffle(self, buffer, seed=None, reshuffle_each_iteration=True):
        """Elements in a random order drawn from a buffer of `buffer` elements (tf.data's
        semantics: a uniform permutation when `buffer` >= the size; element i cannot come out
        before position i - buffer + 1). With a `seed` the order is reproducible; with
        `reshuffle_each_iteration` each pass draws a new one."""
        return self._derive(self._native.shuffle(int(buffer), _seed(seed),
                                                 bool(reshuffle_each_iteration)))

    def batch(self, size, drop_remainder=False, num_parallel=1):
        """Stacks `size` consecutive elements along a new first axis (their arrays must agree in
        shape and dtype); the last batch is smaller unless `drop_remainder`."""
        return self._derive(self._native.batch(int(size), bool(drop_remainder),
                                               int(num_parallel)), batched=True)

    def padded_batch(self, size, padded_shapes=None, padding_value=0, drop_remainder=False):
        """Like :meth:`batch`, padding each component to ``padded_shapes[i]`` (without the batch
        axis; None or -1 dimensions: the largest in the batch) with `padding_value`."""
        shapes = []
        if padded_shapes is not None:
            for s in padded_shapes:
                if s is None:
                    shapes.append([])
                elif isinstance(s, (int, np.integer)):
                    shapes.append([int(s)])
                else:
                    shapes.append([-1 if d is None else int(d) for d in s])
        return self._derive(self._native.padded_batch(int(size), shapes, float(padding_value),
                                                      bool(drop_remainder)), batched=True)

    def repeat(self, count=None):
        """The dataset `count` times (None or -1: forever); each pass reshuffles."""
        return self._derive(self._native.repeat(-1 if count is None else int(count)))

    def take(self, n):
        """The first `n` elements."""
        return self._derive(self._native.take(int(n)))

    def skip(self, n):
        """All but the first `n` elements."""
        return self._derive(self._native.skip(int(n)))

    def shard(self, num, index):
        """Every `num`-th element starting at `index`: worker `index`'s share of the data."""
        return self._derive(self._native.shard(int(num), int(index)))

    def interleave(self, fn, cycle_length, block_length=1):
        """Maps each element to a Dataset (``fn(*arrays)``) and interleaves their elements:
        `cycle_length` of them open at once, `block_length` consecutive elements from each in
        turn (tf.data's order)."""

        def open_dataset(*arrays):
            ds = fn(*arrays)
            if not isinstance(ds, Dataset):
                raise TypeError(f"interleave: the function returned {type(ds).__name__}, "
                                f"not a weft.data.Dataset")
            return ds._native

        return self._derive(self._native.interleave(open_dataset, int(cycle_length),
                                                    int(block_length)), batched=False)

    def cache(self, path=None):
        """Keeps the elements of the first complete pass in memory (or in the file `path`) and
        replays them on later passes without running the stages above."""
        return self._derive(self._native.cache(_path(path)))

    def prefetch(self, buffer=2, device=None):
        """Runs the pipeline ahead of the consumer on a background thread, keeping up to `buffer`
        elements ready (it blocks when they are not taken: memory stays bounded). `device`
        ("cuda:0", a weft.Device): arrays are copied there asynchronously before they are
        handed out."""
        if device is not None and not isinstance(device, _weft.Device):
            device = _weft.Device(str(device))
        return self._derive(self._native.prefetch(int(buffer), device))

    def ignore_errors(self):
        """Drops elements whose stage failed instead of raising :class:`DataError` (counted in
        ``Iterator.stats().skipped_errors``)."""
        return self._derive(self._native.ignore_errors())

    # ---- inspection and iteration ----------------------------------------------------------

    def describe(self):
        """The pipeline, last stage first: ``"batch(32) <- map(decode_image) <- ..."``."""
        return self._native.describe()

    def cardinality(self):
        """The number of elements; :data:`INFINITE` or :data:`UNKNOWN` when it has none."""
        return self._native.cardinality()

    def __len__(self):
        n = self.cardinality()
        if n < 0:
            raise TypeError("the dataset's length is " +
                            ("infinite" if n == INFINITE else "unknown") + " (see cardinality())")
        return n

    def __repr__(self):
        return f"<weft.data.Dataset {self.describe()}>"

    def iterate(self, progress=False):
        """Starts a pass: an :class:`Iterator` of elements (tuples of NDArrays, one NDArray when
        an element has one component). `progress`: True (stderr) or a text stream prints a
        progress bar with the throughput."""
        return Iterator(self, progress)

    def __iter__(self):
        return Iterator(self)

    def as_numpy_iterator(self, progress=False):
        """Like :meth:`iterate`, with NumPy arrays instead of NDArrays."""
        return _NumpyIterator(self, progress)


@dataclasses.dataclass(frozen=True)
class IteratorStats:
    """Counters of one pass (a snapshot)."""

    elements: int  #: elements returned
    samples: int  #: rows returned: a batch counts its rows, other elements count 1
    skipped_errors: int  #: failed elements dropped by ignore_errors()
    consumer_wait_s: float  #: time next() waited on a prefetch buffer
    buffered: int  #: elements ready in prefetch buffers now
    elapsed_s: float  #: since the pass started (until its end, once it ended)

    @property
    def elements_per_s(self):
        return self.elements / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def samples_per_s(self):
        return self.samples / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def wait_fraction(self):
        """The part of the elapsed time the consumer spent waiting for the pipeline."""
        return min(1.0, self.consumer_wait_s / self.elapsed_s) if self.elapsed_s > 0 else 0.0

    def __str__(self):
        return (f"{self.elements} elements, {self.samples} samples in {self.elapsed_s:.2f} s: "
                f"{self.samples_per_s:,.0f} samples/s, waited {100 * self.wait_fraction:.0f}% "
                f"of the time, {self.skipped_errors} skipped errors")


_open_iterators = weakref.WeakSet()


class Iterator:
    """One pass over a :class:`Dataset`. Its stages' threads stop at the end, at
    :meth:`close` (also as a context manager) or when it is garbage-collected."""

    def __init__(self, dataset, progress=False):
        self._native = dataset._native.iterate()
        self._next = self._native.__next__
        self._batched = dataset._batched
        self._samples = 0
        self._start = time.perf_counter()
        self._end = None
        self._progress = None
        if progress:
            stream = sys.stderr if progress is True else progress
            self._progress = _ProgressBar(stream, dataset.cardinality())
        _open_iterators.add(self)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            element = self._next()
        except StopIteration:
            self._finish()
            raise
        if self._batched:
            first = element[0] if isinstance(element, tuple) else element
            self._samples += first.shape[0] if first.ndim > 0 else 1
        else:
            self._samples += 1
        if self._progress is not None:
            self._progress.update(self, final=False)
        return element

    def _finish(self):
        if self._end is None:
            self._end = time.perf_counter()
            if self._progress is not None:
                self._progress.update(self, final=True)

    def stats(self):
        """An :class:`IteratorStats` snapshot (throughput in samples/s and elements/s)."""
        s = self._native.stats()
        end = self._end if self._end is not None else time.perf_counter()
        return IteratorStats(elements=s["elements"], samples=self._samples,
                             skipped_errors=s["skipped_errors"],
                             consumer_wait_s=s["consumer_wait_ns"] * 1e-9,
                             buffered=s["buffered"], elapsed_s=end - self._start)

    def close(self):
        """Stops the pipeline (joins its threads); iteration ends."""
        self._native.close()
        self._finish()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _NumpyIterator(Iterator):
    def __next__(self):
        element = super().__next__()
        if isinstance(element, tuple):
            return tuple(a.asnumpy() for a in element)
        return element.asnumpy()


class _ProgressBar:
    """A one-line progress bar on a text stream, redrawn at most 10 times a second."""

    WIDTH = 30

    def __init__(self, stream, total):
        self._stream = stream
        self._total = total if total >= 0 else None
        self._last = 0.0

    def update(self, it, final):
        now = time.perf_counter()
        if not final and now - self._last < 0.1:
            return
        self._last = now
        s = it.stats()
        if self._total:
            done = min(s.elements, self._total)
            filled = self.WIDTH * done // self._total
            head = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {s.elements}/{self._total}"
        else:
            head = f"{s.elements} elements"
        line = (f"\r{head} | {s.samples_per_s:,.0f} samples/s | "
                f"wait {100 * s.wait_fraction:.0f}%")
        if s.skipped_errors:
            line += f" | {s.skipped_errors} skipped"
        self._stream.write(line + ("\n" if final else ""))
        self._stream.flush()


@atexit.register
def _close_iterators_at_exit():
    # Pipeline threads that call Python must stop while the interpreter can still run them.
    for it in list(_open_iterators):
        try:
            it._native.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


# ---- sources ---------------------------------------------------------------------------------

def _import_array(a):
    """An NDArray for a source: NDArrays as they are, NumPy arrays without a copy (DLPack) when
    they are compact, other values through numpy.asarray."""
    if isinstance(a, NDArray):
        return a
    arr = np.asarray(a)
    if arr.dtype.kind == "O":
        raise TypeError(f"from_arrays: a {type(a).__name__} is not an array")
    if arr.flags.c_contiguous and arr.dtype.isnative:
        try:
            return _weft.from_dlpack(arr)
        except (BufferError, ValueError, TypeError, RuntimeError):
            pass  # a dtype DLPack or weft does not carry: copied below
    from .ndarray import array
    return array(arr)


def from_arrays(*arrays, name="arrays"):
    """One element per row (first axis) of the arrays, which must agree in their first
    dimension (tf.data's from_tensor_slices): ``from_arrays(x, y)`` or ``from_arrays((x, y))``
    gives (x[i], y[i]); ``from_arrays(x)`` gives x[i]. NumPy arrays are shared, not copied
    (DLPack): rows are views of their memory."""
    if len(arrays) == 1 and isinstance(arrays[0], tuple):
        arrays = arrays[0]
    if not arrays:
        raise ValueError("from_arrays: give at least one array")
    return Dataset(_weft._data_from_arrays([_import_array(a) for a in arrays], name))


def range(start, stop=None, step=1):  # noqa: A001 - mirrors the builtin, as tf.data does
    """int64 scalars as the builtin ``range`` gives them: ``range(5)``, ``range(2, 10, 3)``."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("range: step must not be 0")
    return Dataset(_weft._data_range(int(start), int(stop), int(step)))


def from_generator(fn, name=None):
    """Elements from Python: ``fn()`` returns an iterable (a generator function, a list, ...)
    once per pass; each item is an element (an array, a NumPy array, anything numpy.asarray
    takes, or a tuple of those). It runs on the thread that pulls elements (the consumer or a
    prefetcher), holding the GIL only while it produces an item. A re-iterable object (a list)
    may be given instead of a function."""
    if not callable(fn):
        if iter(fn) is fn:
            raise TypeError("from_generator: give a function that returns an iterator (a "
                            "generator function), not an iterator: each pass needs a new one")
        items = fn
        fn = lambda: items  # noqa: E731
        name = name or "iterable"
    return Dataset(_weft._data_from_generator(fn, name or _function_name(fn)))


def npy_files(shards):
    """Rows of memory-mapped ``.npy`` files, zero-copy (read-only arrays). `shards` is a list of
    shards, each a path (one component) or a sequence of paths read side by side (one component
    per file, e.g. ``[("x0.npy", "y0.npy"), ("x1.npy", "y1.npy")]``)."""
    if isinstance(shards, (str, os.PathLike)):
        shards = [shards]
    norm = []
    for s in shards:
        if isinstance(s, (str, os.PathLike)):
            norm.append([os.fspath(s)])
        else:
            norm.append([os.fspath(p) for p in s])
    return Dataset(_weft._data_npy_files(norm))


def recordio(rec_path, idx_path=None, image_records=False):
    """The records of an MXNet RecordIO file: elements (uint8 bytes [n],), or with
    `image_records` (image bytes uint8 [n], label float32 [k]) from MXNet's image header. With
    the `.idx` file the size is known and a corrupt record can be skipped (ignore_errors)."""
    return Dataset(_weft._data_recordio(_path(rec_path), _path(idx_path), bool(image_records)))


def image_folder(root, extensions=None):
    """The images under `root`, one subfolder per class (labels 0, 1, ... in sorted order): as
    (file bytes uint8 [n], label int32 []); decode them with ``map(decode_image(), ...)``."""
    exts = None if extensions is None else [e if e.startswith(".") else "." + e
                                            for e in extensions]
    return Dataset(_weft._data_image_folder(_path(root), exts))


def image_folder_classes(root):
    """The class names of :func:`image_folder` (root), in label order."""
    return _weft._data_image_folder_classes(_path(root))


def _to_bytes(data):
    if isinstance(data, bytes):
        return data
    if isinstance(data, NDArray):
        return data.asnumpy().tobytes()
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).tobytes()
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, a bytes-like object or an array, got {type(data).__name__}")


class RecordIOWriter:
    """Writes an MXNet RecordIO file (and its ``.idx`` index when `idx_path` is given), as
    MXNet's ``MXIndexedRecordIO`` and ``im2rec`` do. Records get keys 0, 1, ... unless given.
    Use from one thread; a context manager closes it."""

    def __init__(self, rec_path, idx_path=None):
        self._native = _weft._RecordIOWriter(_path(rec_path), _path(idx_path))
        self._next_key = 0

    def _key(self, key):
        if key is None:
            key = self._next_key
        self._next_key = int(key) + 1
        return int(key)

    def write(self, record, key=None):
        """Appends one record (bytes, a bytes-like object or a uint8 array)."""
        self._native.write(_to_bytes(record), self._key(key))

    def write_image(self, image, label, key=None):
        """Appends an image record: MXNet's header with `label` (a number, or a sequence for
        several labels), then the encoded `image` bytes."""
        labels = [float(v) for v in np.atleast_1d(np.asarray(label, dtype=np.float32))]
        self._native.write_image(labels, _to_bytes(image), self._key(key))

    def close(self):
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- transforms ------------------------------------------------------------------------------

def decode_image(channels=3, component=0):
    """Encoded JPEG/PNG bytes (uint8 [n]) -> HWC uint8 with `channels` (1, 3; 0: as stored)."""
    return _weft._data_decode_image(int(channels), int(component))


def random_crop(height, width, component=0):
    """A random `height` x `width` window of an HWC image (drawn from the element's generator)."""
    return _weft._data_random_crop(int(height), int(width), int(component))


def center_crop(height, width, component=0):
    """The central `height` x `width` window of an HWC image."""
    return _weft._data_center_crop(int(height), int(width), int(component))


def random_flip_left_right(p=0.5, component=0):
    """Mirrors an HWC image left-right with probability `p`."""
    return _weft._data_random_flip_left_right(float(p), int(component))


def resize(height, width, component=0):
    """Resizes an HWC image to `height` x `width` (bilinear, MXNet's image.resize)."""
    return _weft._data_resize(int(height), int(width), int(component))


def to_tensor(component=0):
    """HWC uint8 -> CHW float32 in [0, 1] (MXNet's ToTensor)."""
    return _weft._data_to_tensor(int(component))


def normalize(mean, std, component=0):
    """CHW float32: (x - mean[c]) / std[c] per channel (MXNet's Normalize)."""
    mean = [float(v) for v in np.atleast_1d(mean)]
    std = [float(v) for v in np.atleast_1d(std)]
    return _weft._data_normalize(mean, std, int(component))


def compose(*transforms):
    """Applies the transforms in order, as one map function. Python callables may be mixed in
    (the composition then runs on the map's own threads, as a Python function does)."""
    if len(transforms) == 1 and isinstance(transforms[0], (list, tuple)):
        transforms = tuple(transforms[0])
    if not transforms:
        raise ValueError("compose: give at least one transform")
    return _weft._data_compose([_as_transform(t) for t in transforms])


# ---- image codecs ----------------------------------------------------------------------------

def decode_image_bytes(data, channels=0):
    """Decodes JPEG or PNG bytes into an HWC uint8 NDArray (`channels` 1 or 3; 0: as stored)."""
    return _weft._data_decode_image_bytes(_to_bytes(data), int(channels))


def encode_jpeg(image, quality=90):
    """Encodes an HWC uint8 image (NDArray or NumPy; 1 or 3 channels) as JPEG bytes."""
    return _weft._data_encode_jpeg(image, int(quality))


def encode_png(image):
    """Encodes an HWC uint8 image (NDArray or NumPy; 1, 3 or 4 channels) as PNG bytes."""
    return _weft._data_encode_png(image)

