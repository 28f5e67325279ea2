"""Python threads pushing operations at the same time: results against NumPy, a shared input
read by every thread, and autograd's per-thread flags."""
import threading

import numpy as np

import weft
from weft import autograd as ag

THREADS = 8


def _run(worker):
    """Runs worker(i) on THREADS threads; re-raises the first exception a thread raised."""
    errors = []

    def target(i):
        try:
            worker(i)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread did not finish"
    if errors:
        raise errors[0]


def test_threads_push_on_own_and_shared_arrays():
    rng = np.random.default_rng(11)
    shared_np = rng.standard_normal((48, 48)).astype(np.float32)
    shared = weft.array(shared_np)
    inputs = [rng.standard_normal((48, 48)).astype(np.float32) for _ in range(THREADS)]
    results = [None] * THREADS
    start = threading.Barrier(THREADS)

    def worker(i):
        own = weft.array(inputs[i])
        start.wait()
        acc = weft.zeros((48, 48))
        for k in range(25):
            y = (own @ shared) * (1.0 / 48) + shared.sin() - float(k)
            acc += y.tanh()
            own = own * 0.5 + y.relu() * 0.01
        results[i] = (acc.asnumpy(), own.asnumpy())

    _run(worker)
    s = shared_np.astype(np.float64)
    for i in range(THREADS):
        own = inputs[i].astype(np.float64)
        acc = np.zeros((48, 48))
        for k in range(25):
            y = (own @ s) * (1.0 / 48) + np.sin(s) - k
            acc += np.tanh(y)
            own = own * 0.5 + np.maximum(y, 0) * 0.01
        np.testing.assert_allclose(results[i][0], acc, rtol=1e-4, atol=1e-4, err_msg=f"thread {i}")
        np.testing.assert_allclose(results[i][1], own, rtol=1e-4, atol=1e-4, err_msg=f"thread {i}")
    # The shared input was only read.
    np.testing.assert_array_equal(shared.asnumpy(), shared_np)


def test_threads_write_disjoint_rows_of_one_array():
    out = weft.zeros((THREADS, 1000), dtype="float64")

    def worker(i):
        row = out[i]  # a view: writes go to the shared storage
        for k in range(20):
            row += float(i + k)

    _run(worker)
    expected = np.array([[sum(i + k for k in range(20))] * 1000 for i in range(THREADS)], float)
    np.testing.assert_array_equal(out.asnumpy(), expected)


def test_threads_with_their_own_gradients():
    rng = np.random.default_rng(12)
    data = [rng.standard_normal(16) for _ in range(THREADS)]
    grads = [None] * THREADS

    def worker(i):
        x = weft.array(data[i])
        x.attach_grad()
        for _ in range(5):
            with ag.record():
                y = (x * x * float(i + 1)).sum()
            y.backward()
        grads[i] = x.grad.asnumpy()

    _run(worker)
    for i in range(THREADS):
        np.testing.assert_allclose(grads[i], 2 * (i + 1) * data[i], rtol=1e-12)


def test_autograd_flags_are_per_thread():
    inside = threading.Barrier(THREADS)
    seen = [None] * THREADS
    recorded = [None] * THREADS

    def worker(i):
        x = weft.array([1.0, 2.0])
        x.attach_grad()
        if i % 2 == 0:
            with ag.record():
                inside.wait()  # every thread is inside its scope (or not) now
                seen[i] = (ag.is_recording(), ag.is_training())
                recorded[i] = (x * 2).requires_grad
                inside.wait()
        else:
            inside.wait()
            seen[i] = (ag.is_recording(), ag.is_training())
            recorded[i] = (x * 2).requires_grad
            inside.wait()

    _run(worker)
    for i in range(THREADS):
        assert seen[i] == ((True, True) if i % 2 == 0 else (False, False)), i
        assert recorded[i] == (i % 2 == 0), i
    assert not ag.is_recording()
