"""Asynchrony: operations return before they run, reads wait, the engine orders reads and writes,
and a kernel's error reaches Python at the next wait on what it wrote (once), and waitall."""
import numpy as np
import pytest

import weft
from weft import autograd as ag

N = 256
STEPS = 8


def _chain(rng):
    """A dependent chain of matmuls: weft arrays and the float64 NumPy reference."""
    x0 = rng.uniform(-1, 1, (N, N)).astype(np.float32)
    ws = [(rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32) for _ in range(STEPS)]
    ref = x0.astype(np.float64)
    for w in ws:
        ref = np.tanh(ref @ w.astype(np.float64))
    return x0, ws, ref


def test_operations_return_before_they_run(rng):
    x0, ws, ref = _chain(rng)
    x = weft.array(x0)
    warrays = [weft.array(w) for w in ws]
    weft.waitall()
    y = x
    for w in warrays:
        y = (y @ w).tanh()
    # Every call above has returned; the last result depends on 2 * STEPS kernels run one after
    # another, so it cannot have been written yet: nothing has completed a write to it.
    assert y._version == 0
    out = y.asnumpy()  # reading waits
    assert y._version == 1
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-5)


def test_reads_and_writes_are_ordered(rng):
    x0, ws, ref = _chain(rng)
    x = weft.array(x0)
    y = x
    for w in ws[:6]:
        y = (y @ weft.array(w)).tanh()
    before = y * 1.0  # reads y before the in-place write below
    y += 1.0  # waits for the read above, inside the engine, not here
    after = y * 1.0
    x += 100.0  # x was read by the first matmul: that read sees the old values
    expected = x0.astype(np.float64)
    for w in ws[:6]:
        expected = np.tanh(expected @ w.astype(np.float64))
    np.testing.assert_allclose(before.asnumpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(after.asnumpy(), expected + 1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x.asnumpy(), x0.astype(np.float64) + 100, rtol=1e-6)


def test_wait_to_read_and_waitall_return_results(rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    x = weft.array(a)
    ys = [x * float(k) for k in range(10)]
    ys[-1].wait_to_read()
    weft.waitall()
    for k, y in enumerate(ys):
        assert y._version == 1
        np.testing.assert_allclose(y.asnumpy(), a.astype(np.float64) * k, rtol=1e-6)


def _failing_gradient():
    """x.grad, written by a backward kernel that fails at run time (label 7 of 3 classes): the
    push succeeds, the kernel raises."""
    x = weft.zeros((2, 3), dtype="float64")
    x.attach_grad()
    label = weft.array(np.array([0.0, 7.0]))
    with ag.record():
        y = weft.op.SoftmaxOutput(x, label)
    y.backward()  # returns: the failure has not happened yet (or not been seen)
    return x.grad


def test_kernel_error_surfaces_at_the_next_wait_once():
    g = _failing_gradient()
    other = weft.ones(3) * 2  # unrelated work is unaffected
    with pytest.raises(ValueError, match=r"_backward_SoftmaxOutput.*label 7 is out of range"):
        g.wait_to_read()
    g.wait_to_read()  # delivered once: the second wait succeeds
    np.testing.assert_array_equal(other.asnumpy(), [2, 2, 2])
    # waitall reports every failure since the last waitall, including ones already delivered.
    with pytest.raises(weft.EngineError, match="_backward_SoftmaxOutput"):
        weft.waitall()
    weft.waitall()


def test_kernel_error_surfaces_at_asnumpy():
    g = _failing_gradient()
    with pytest.raises(ValueError, match="out of range"):
        g.asnumpy()
    assert g.asnumpy().shape == (2, 3)
    with pytest.raises(weft.EngineError):
        weft.waitall()


def test_dependent_operations_are_skipped_with_the_error():
    g = _failing_gradient()
    h = g * 2 + 1  # pushed after the failing kernel: skipped, and carries its error
    with pytest.raises(ValueError, match="label 7"):
        h.wait_to_read()
    with pytest.raises(ValueError, match="label 7"):
        g.wait_to_read()
    with pytest.raises(weft.EngineError, match=r"1 operation failed and \d+ dependent"):
        weft.waitall()


def test_waitall_raises_unobserved_failures_once():
    g = _failing_gradient()
    with pytest.raises(weft.EngineError, match="_backward_SoftmaxOutput") as info:
        weft.waitall()
    assert isinstance(info.value, weft.WeftError)
    assert isinstance(info.value, RuntimeError)
    weft.waitall()  # once: nothing more to report
    # waitall cleared the error: the array is usable again.
    g.wait_to_read()
    g[:] = 1.0
    np.testing.assert_array_equal(g.asnumpy(), np.ones((2, 3)))


def test_errors_found_at_push_time_are_raised_at_once():
    with pytest.raises(weft.ShapeError):
        weft.ones((2, 3)) @ weft.ones((2, 3))
    weft.waitall()  # nothing was pushed, so nothing failed
