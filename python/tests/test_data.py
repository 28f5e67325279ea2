"""weft.data: every transform against a plain-Python reference on small data, determinism under
parallelism, shuffle's buffer bound, errors naming the element, back-pressure and prefetch
overlap (through the iterator's counters, never wall-clock speed), Python generators, NumPy in and
out, and threads. File formats and images are in test_data_files.py."""
import io
import threading
import time

import numpy as np
import pytest

import weft
import weft.data as wd


# ---- plain-Python references -------------------------------------------------------------------

def values(ds):
    """A dataset of scalars (or one-component elements) as a list of Python values/ndarrays."""
    out = []
    for e in ds.as_numpy_iterator():
        out.append(e.item() if isinstance(e, np.ndarray) and e.ndim == 0 else e)
    return out


def batch_ref(items, size, drop_remainder):
    out = [items[i:i + size] for i in range(0, len(items), size)]
    if drop_remainder and out and len(out[-1]) < size:
        out.pop()
    return out


def pad_ref(seqs, padded_shape, value):
    n = padded_shape if padded_shape not in (None, -1) else max(len(s) for s in seqs)
    out = np.full((len(seqs), n), value, dtype=seqs[0].dtype)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out


def interleave_ref(inputs, fn, cycle, block):
    """tf.data's order: slots opened lazily as the cycle reaches them; a slot gives `block`
    elements, then the cycle moves on; an exhausted slot is emptied and the cycle moves on."""
    inputs = iter(inputs)
    slots = [None] * cycle
    end_input, open_, ci, bi, out = False, 0, 0, 0, []
    while not end_input or open_ > 0:
        if slots[ci] is not None:
            try:
                v = next(slots[ci])
            except StopIteration:
                slots[ci] = None
                open_ -= 1
                ci, bi = (ci + 1) % cycle, 0
                continue
            out.append(v)
            bi += 1
            if bi == block:
                ci, bi = (ci + 1) % cycle, 0
        elif not end_input:
            try:
                e = next(inputs)
            except StopIteration:
                end_input = True
                continue
            slots[ci] = iter(fn(e))
            open_ += 1
        else:
            ci, bi = (ci + 1) % cycle, 0
    return out


# ---- sources and element conversion ------------------------------------------------------------

def test_from_arrays_gives_rows_as_tuples_of_ndarrays(rng):
    x = rng.standard_normal((7, 3)).astype(np.float32)
    y = np.arange(7, dtype=np.int64)
    ds = wd.from_arrays(x, y)
    assert ds.cardinality() == 7 and len(ds) == 7
    elements = list(ds)
    assert len(elements) == 7
    for i, (a, b) in enumerate(elements):
        assert isinstance(a, weft.NDArray) and isinstance(b, weft.NDArray)
        np.testing.assert_array_equal(a.asnumpy(), x[i])
        assert b.asnumpy().dtype == np.int64 and b.item() == i
    # One component: the array itself, not a 1-tuple; a tuple argument means components.
    single = list(wd.from_arrays(x))
    assert all(isinstance(a, weft.NDArray) for a in single)
    assert [tuple(e[0].shape) for e in [list(wd.from_arrays((x, y)))[0]]] == [(3,)]


def test_from_arrays_takes_numpy_without_copying_and_gives_numpy_back(rng):
    x = rng.integers(0, 100, (5, 2)).astype(np.int32)
    ds = wd.from_arrays(x)
    x[3] = -1  # the dataset shares the NumPy memory (DLPack)
    out = list(ds.as_numpy_iterator())
    assert all(isinstance(r, np.ndarray) and r.dtype == np.int32 for r in out)
    np.testing.assert_array_equal(np.stack(out), x)
    # Strided arrays and lists are copied; weft arrays are taken as they are.
    s = np.arange(20, dtype=np.float64).reshape(10, 2)[::2]
    np.testing.assert_array_equal(np.stack(list(wd.from_arrays(s).as_numpy_iterator())), s)
    np.testing.assert_array_equal(values(wd.from_arrays([1, 2, 3])), [1, 2, 3])
    w = weft.array([[1, 2], [3, 4]])
    np.testing.assert_array_equal(np.stack(list(wd.from_arrays(w).as_numpy_iterator())),
                                  [[1, 2], [3, 4]])


def test_range_matches_the_builtin():
    for args in [(5,), (2, 11, 3), (10, 0, -3), (3, 3), (0, -4, -1)]:
        ds = wd.range(*args)
        assert values(ds) == list(range(*args)), args
        assert ds.cardinality() == len(range(*args)), args
    assert list(wd.range(3).as_numpy_iterator())[0].dtype == np.int64


def test_python_generator_source_runs_once_per_pass():
    calls = []

    def gen():
        calls.append(1)
        for i in range(4):
            yield np.float32(2 * i), np.array([i, i], dtype=np.int16)

    ds = wd.from_generator(gen)
    assert ds.cardinality() == wd.UNKNOWN
    out = list(ds.repeat(2).as_numpy_iterator())
    assert len(calls) == 2 and len(out) == 8
    for k, (a, b) in enumerate(out):
        i = k % 4
        assert a.dtype == np.float32 and a == 2 * i
        assert b.dtype == np.int16 and list(b) == [i, i]
    # A re-iterable object works too; a one-shot iterator is refused.
    assert values(wd.from_generator([5, 6, 7])) == [5, 6, 7]
    with pytest.raises(TypeError, match="not an iterator"):
        wd.from_generator(iter([1, 2]))


# ---- transforms against references --------------------------------------------------------------

@pytest.mark.parametrize("num_parallel", [1, 4])
def test_map_with_python_functions_matches_the_reference(num_parallel):
    items = list(range(23))
    ds = wd.range(23)
    # Weft arrays in, weft operations inside, a weft array out.
    assert values(ds.map(lambda x: x * 3, num_parallel)) == [3 * i for i in items]
    # NumPy out (its dtype is kept), and several components.
    out = list(ds.map(lambda x: (x.asnumpy() + 0.5, np.full((2,), x.item(), np.int8)),
                      num_parallel).as_numpy_iterator())
    assert [a.item() for a, _ in out] == [i + 0.5 for i in items]
    assert all(a.dtype == np.float64 and b.dtype == np.int8 and list(b) == [i, i]
               for i, (a, b) in enumerate(out))
    # A function of several components, returning one.
    pairs = wd.from_arrays(np.arange(6), np.arange(6) * 10)
    assert values(pairs.map(lambda a, b: a.asnumpy() + b.asnumpy(), num_parallel)) == \
        [11 * i for i in range(6)]


def test_map_not_deterministic_returns_every_element():
    def slow_on_even(x):
        if x.item() % 2 == 0:
            time.sleep(0.002)
        return x

    out = values(wd.range(40).map(slow_on_even, 4, deterministic=False))
    assert sorted(out) == list(range(40))


def test_filter_matches_the_reference():
    ds = wd.range(30).filter(lambda x: x.item() % 3 == 1)
    assert values(ds) == [i for i in range(30) if i % 3 == 1]
    assert ds.cardinality() == wd.UNKNOWN
    # A one-element array is a truth value too.
    assert values(wd.range(10).filter(lambda x: x > 6)) == [7, 8, 9]


def test_shuffle_with_a_large_buffer_is_a_seeded_permutation():
    n = 50
    a = values(wd.range(n).shuffle(n, seed=3))
    assert sorted(a) == list(range(n)) and a != list(range(n))
    assert values(wd.range(n).shuffle(1000, seed=3)) == a  # buffer >= size: same draw
    assert values(wd.range(n).shuffle(n, seed=4)) != a
    # Reshuffled each pass of repeat(), reproducibly; the same order when asked not to.
    two = values(wd.range(n).shuffle(n, seed=3).repeat(2))
    assert sorted(two[:n]) == sorted(two[n:]) == list(range(n)) and two[:n] != two[n:]
    assert values(wd.range(n).shuffle(n, seed=3).repeat(2)) == two
    same = values(wd.range(n).shuffle(n, seed=3, reshuffle_each_iteration=False).repeat(2))
    assert same[:n] == same[n:]


@pytest.mark.parametrize("buffer", [1, 2, 3, 7])
def test_shuffle_buffer_bounds_how_early_an_element_can_come(buffer):
    # Note [Shuffle buffer] (tf.data's semantics): the buffer starts with elements 0..B-1, and
    # after each draw the next input element takes the drawn one's place, so output position p
    # is drawn from elements 0..B-1+p: element i comes out at a position >= i - B + 1. The bound
    # is reached: element B-1 comes first in some seeds.
    n = 40
    earliest = []
    for seed in range(30):
        out = values(wd.range(n).shuffle(buffer, seed=seed))
        assert sorted(out) == list(range(n))
        pos = {v: p for p, v in enumerate(out)}
        assert all(pos[i] >= i - buffer + 1 for i in range(n)), (seed, out)
        earliest.append(min(pos[i] - i for i in range(n)))
    assert min(earliest) == -(buffer - 1)
    if buffer == 1:
        assert values(wd.range(n).shuffle(1, seed=0)) == list(range(n))


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_batch_matches_the_reference(rng, drop_remainder):
    x = rng.standard_normal((11, 2, 3)).astype(np.float32)
    y = np.arange(11, dtype=np.int32)
    ds = wd.from_arrays(x, y).batch(4, drop_remainder=drop_remainder)
    got = list(ds.as_numpy_iterator())
    ref = batch_ref(list(range(11)), 4, drop_remainder)
    assert ds.cardinality() == len(ref) == len(got)
    for (bx, by), rows in zip(got, ref):
        np.testing.assert_array_equal(bx, x[rows])
        np.testing.assert_array_equal(by, y[rows])
    # Scalars batch into vectors.
    assert [list(b) for b in wd.range(7).batch(3).as_numpy_iterator()] == [[0, 1, 2], [3, 4, 5],
                                                                           [6]]


@pytest.mark.parametrize("padded_shape", [None, 6])
def test_padded_batch_matches_the_reference(padded_shape):
    lengths = [1, 4, 2, 5, 3, 0, 2]
    seqs = [np.arange(n, dtype=np.int32) + 1 for n in lengths]
    ds = wd.from_generator(lambda: ((s, np.int64(len(s))) for s in seqs))
    shapes = None if padded_shape is None else [[padded_shape], None]
    got = list(ds.padded_batch(3, shapes, padding_value=-7).as_numpy_iterator())
    ref = batch_ref(list(range(len(seqs))), 3, False)
    assert len(got) == len(ref)
    for (bx, bn), rows in zip(got, ref):
        np.testing.assert_array_equal(bx, pad_ref([seqs[i] for i in rows], padded_shape, -7))
        np.testing.assert_array_equal(bn, [lengths[i] for i in rows])
    dropped = list(ds.padded_batch(3, drop_remainder=True).as_numpy_iterator())
    assert len(dropped) == 2


def test_repeat_take_skip_and_shard_match_slicing():
    items = list(range(10))
    assert values(wd.range(10).repeat(3)) == items * 3
    assert values(wd.range(10).repeat().take(25)) == (items * 3)[:25]
    assert wd.range(10).repeat().cardinality() == wd.INFINITE
    assert wd.range(10).repeat().take(25).cardinality() == 25
    for n in (0, 3, 10, 15):
        assert values(wd.range(10).take(n)) == items[:n]
        assert values(wd.range(10).skip(n)) == items[n:]
        assert wd.range(10).skip(n).cardinality() == len(items[n:])
    for num in (1, 3, 4):
        for index in range(num):
            ds = wd.range(10).shard(num, index)
            assert values(ds) == items[index::num]
            assert ds.cardinality() == len(items[index::num])
    assert values(wd.range(10).skip(2).shard(3, 1).take(2)) == items[2:][1::3][:2]


@pytest.mark.parametrize("cycle,block", [(1, 1), (2, 1), (2, 2), (3, 2), (4, 3)])
def test_interleave_follows_the_cycle_and_block_order(cycle, block):
    lengths = {1: 3, 2: 1, 3: 5, 4: 0, 5: 4, 6: 2}

    def inner(n):
        return [100 * n + j for j in range(lengths[n])]

    ds = wd.range(1, 7).interleave(lambda n: wd.from_generator(lambda: inner(n.item())),
                                   cycle_length=cycle, block_length=block)
    assert values(ds) == interleave_ref(range(1, 7), inner, cycle, block)


def test_cache_replays_without_running_the_stages_above(tmp_path):
    calls = []

    def record(x):
        calls.append(x.item())
        return x * 2

    ds = wd.range(6).map(record).cache()
    assert values(ds.repeat(3)) == [2 * i for i in range(6)] * 3
    assert sorted(calls) == list(range(6))  # the map ran on the first pass only
    path = tmp_path / "cache.bin"
    calls.clear()
    on_file = wd.range(6).map(record).cache(path)
    assert values(on_file.repeat(2)) == [2 * i for i in range(6)] * 2
    assert sorted(calls) == list(range(6)) and path.exists()
    calls.clear()
    # A new pipeline over the same complete file reads it back.
    assert values(wd.range(6).map(record).cache(path)) == [2 * i for i in range(6)]
    assert calls == []


# ---- determinism ---------------------------------------------------------------------------------

def test_random_transforms_give_the_same_results_for_any_num_parallel(rng):
    images = rng.integers(0, 256, (12, 20, 24, 3)).astype(np.uint8)
    augment = wd.compose(wd.random_crop(12, 16), wd.random_flip_left_right())

    def run(num_parallel, seed):
        ds = wd.from_arrays(images).map(augment, num_parallel, seed=seed)
        return np.stack(list(ds.as_numpy_iterator()))

    a = run(1, 7)
    assert a.shape == (12, 12, 16, 3)
    np.testing.assert_array_equal(run(4, 7), a)
    assert not np.array_equal(run(4, 8), a)

    def noisy(x, rng):
        return x.asnumpy() + rng.integers(0, 1000)

    def run_py(num_parallel):
        ds = wd.range(20).shuffle(8, seed=1).map(noisy, num_parallel, seed=5, rng=True)
        return values(ds)

    assert run_py(1) == run_py(4)


# ---- errors --------------------------------------------------------------------------------------

def test_failing_python_map_raises_data_error_naming_the_element():
    def explode(x):
        if x.item() == 3:
            return x.item() / 0
        return x

    it = wd.range(6).map(explode, 2).iterate()
    assert [next(it).item() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(wd.DataError) as e:
        next(it)
    err = e.value
    assert isinstance(err, ValueError) and err.index == 3 and "range value 3" in err.origin
    message = str(err)
    for part in ("map(explode)", "element 3", "ZeroDivisionError", "division by zero",
                 "x.item() / 0"):
        assert part in message, message
    assert [x.item() for x in it] == [4, 5]  # the pass goes on after the failed element


def test_keyboard_interrupt_in_a_python_function_stops_the_iteration_as_itself():
    def interrupted(x):
        if x.item() == 2:
            raise KeyboardInterrupt
        return x

    # Not an element's failure: neither wrapped into DataError nor skipped by ignore_errors.
    for ds in (wd.range(5).map(interrupted, 2), wd.range(5).map(interrupted).ignore_errors(),
               wd.range(5).filter(lambda x: interrupted(x) is not None)):
        it = ds.iterate()
        assert [next(it).item() for _ in range(2)] == [0, 1]
        with pytest.raises(KeyboardInterrupt):
            next(it)
        it.close()


def test_failing_filter_generator_and_interleave_raise_data_error():
    with pytest.raises(wd.DataError, match=r"filter\(picky\).*KeyError.*'k'") as e:
        def picky(x):
            if x.item() == 2:
                raise KeyError("k")
            return True
        list(wd.range(5).filter(picky))
    assert e.value.index == 2

    def gen():
        yield 1
        yield 2
        raise RuntimeError("the source broke")

    with pytest.raises(wd.DataError, match="RuntimeError: the source broke") as e:
        list(wd.from_generator(gen))
    assert e.value.index == 2
    with pytest.raises(wd.DataError, match="not a weft.data.Dataset"):
        list(wd.range(3).interleave(lambda x: [1, 2], 2))
    with pytest.raises(wd.DataError, match="not an array"):
        list(wd.range(3).map(lambda x: object()))


# ---- back-pressure and overlap -------------------------------------------------------------------

def wait_until(cond, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for the pipeline"
        time.sleep(0.002)


@pytest.mark.parametrize("num_parallel", [0, 3])
def test_prefetch_keeps_a_slow_consumer_s_producer_bounded(num_parallel):
    # Note [Prefetch producer]: the producer pulls only when the buffer has room, so it holds at
    # most `buffer` elements; a map of num_parallel in flight holds at most num_parallel more.
    buffer = 4
    produced = [0]

    def gen():
        for i in range(1000):
            produced[0] += 1
            yield np.int64(i)

    ds = wd.from_generator(gen)
    if num_parallel:
        ds = ds.map(lambda x: x, num_parallel)
    it = ds.prefetch(buffer).iterate()
    bound = buffer + num_parallel
    for consumed in range(1, 31):
        assert next(it).item() == consumed - 1
        wait_until(lambda: it.stats().buffered == buffer)  # the producer has run ahead
        time.sleep(0.002)
        assert buffer <= produced[0] - consumed <= bound, (consumed, produced[0])
    it.close()


def test_prefetch_overlaps_the_pipeline_with_the_consumer():
    # The producer needs ~2 ms per batch, the consumer spends 5 ms on each: once the buffer is
    # warm the consumer should hardly ever wait (measured by the iterator's wait counter).
    def work(x):
        time.sleep(0.001)
        return x

    it = wd.range(60).map(work, 2).batch(2).prefetch(4).iterate()
    for _ in range(3):
        next(it)
    warm = it.stats().consumer_wait_s
    slept = 0.0
    for _ in it:
        time.sleep(0.005)
        slept += 0.005
    waited = it.stats().consumer_wait_s - warm
    assert slept > 0.1 and waited < 0.25 * slept, (waited, slept)


# ---- iteration, statistics, threads --------------------------------------------------------------

def test_describe_cardinality_and_len():
    ds = wd.range(10).map(wd.to_tensor()).batch(3)
    assert "batch" in ds.describe() and "map(to_tensor" in ds.describe() and "range" in repr(ds)
    assert ds.cardinality() == 4 and wd.range(10).batch(3, drop_remainder=True).cardinality() == 3
    with pytest.raises(TypeError, match="infinite"):
        len(wd.range(3).repeat())
    with pytest.raises(TypeError, match="unknown"):
        len(wd.range(3).filter(lambda x: True))


def test_stats_count_samples_and_the_progress_bar_prints(tmp_path):
    stream = io.StringIO()
    it = wd.range(10).batch(4).prefetch(2).iterate(progress=stream)
    sizes = [len(b) for b in it]
    s = it.stats()
    assert sizes == [4, 4, 2] and s.elements == 3 and s.samples == 10
    assert s.elapsed_s > 0 and s.samples_per_s > 0 and s.skipped_errors == 0
    assert "3/3" in stream.getvalue() and "samples/s" in stream.getvalue()
    assert stream.getvalue().endswith("\n") and str(s).startswith("3 elements, 10 samples")


def test_closing_or_dropping_a_running_pipeline_does_not_deadlock():
    # Python map threads and a prefetch producer are busy (they need the GIL) when the iterator
    # is closed or collected; both join them with the GIL released.
    ds = wd.range(10_000).map(lambda x: x + 1, 4).prefetch(3).repeat()
    done = []

    def body():
        it = ds.iterate()
        next(it)
        it.close()
        it2 = iter(ds)
        next(it2)
        del it2
        done.append(True)

    t = threading.Thread(target=body)
    t.start()
    t.join(60)
    assert done == [True]


def test_python_threads_iterate_separate_passes_at_once():
    ds = wd.range(200).map(lambda x: x * 2, 2).batch(10).prefetch(2)
    results = {}

    def body(k):
        results[k] = [int(v) for b in ds.as_numpy_iterator() for v in b]

    threads = [threading.Thread(target=body, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(results[k] == [2 * i for i in range(200)] for k in range(4))


@pytest.mark.skipif(not weft.cuda_available(), reason="no CUDA device")
def test_prefetch_to_a_device_hands_out_device_arrays():
    out = list(wd.range(6).batch(3).prefetch(2, device="cuda:0"))
    assert all(str(b.device).startswith("cuda") for b in out)
    assert [list(b.asnumpy()) for b in out] == [[0, 1, 2], [3, 4, 5]]
