"""DLPack: zero-copy exchange with NumPy both ways, capsule kinds and names, refusals (strided,
consumed, device), lifetimes, and the NumPy array protocol. PyTorch: test_dlpack_torch.py.
scripts/python_test.sh runs this file with NumPy 1.24 (the unversioned protocol) and NumPy 2.x
(which asks for versioned capsules)."""
import gc

import numpy as np
import pytest

import weft


def test_numpy_from_weft_shares_memory():
    x = weft.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    a = np.from_dlpack(x)
    assert a.shape == (2, 3) and a.dtype == np.float32
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    assert a.ctypes.data == x._data_ptr()
    # NumPy (before 2.x) marks imported arrays read-only; write on the weft side instead.
    x += 10
    x.wait_to_read()
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) + 10)


def test_weft_from_numpy_shares_memory():
    n = np.arange(8, dtype=np.float64)
    x = weft.from_dlpack(n)
    assert x.dtype == np.float64 and x.shape == (8,)
    assert x._data_ptr() == n.ctypes.data
    n[2] = 100.0  # NumPy writes, weft reads
    assert x[2].item() == 100.0
    x *= 2  # weft writes, NumPy reads after the wait
    x.wait_to_read()
    np.testing.assert_array_equal(n, [0, 2, 200, 6, 8, 10, 12, 14])


def test_capsule_names():
    x = weft.array([1.0, 2.0])
    versioned = x.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    legacy = x.__dlpack__()
    assert '"dltensor"' in repr(legacy)
    legacy2 = x.__dlpack__(max_version=None)
    assert '"dltensor"' in repr(legacy2)
    assert '"dltensor"' in repr(x.__dlpack__(max_version=(0, 8)))
    # Both import (and unconsumed capsules are freed without leaking or crashing).
    np.testing.assert_array_equal(weft.from_dlpack(versioned).asnumpy(), [1, 2])
    np.testing.assert_array_equal(weft.from_dlpack(legacy).asnumpy(), [1, 2])
    assert "used_dltensor_versioned" in repr(versioned)
    assert "used_dltensor" in repr(legacy)
    del legacy2
    gc.collect()


def test_dlpack_device():
    assert weft.ones(2).__dlpack_device__() == (1, 0)


def test_strided_numpy_view_is_refused():
    a = np.arange(12.0).reshape(3, 4)
    with pytest.raises(ValueError, match="strided"):
        weft.from_dlpack(a[:, ::2])
    with pytest.raises(ValueError, match="strided"):
        weft.from_dlpack(a.T)


def test_device_mismatch_raises_buffer_error():
    x = weft.ones(3)
    with pytest.raises(BufferError, match="cpu"):
        x.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        x.__dlpack__(dl_device=(2, 0), copy=True)
    # The array's own device is accepted.
    np.testing.assert_array_equal(weft.from_dlpack(x.__dlpack__(dl_device=(1, 0))).asnumpy(),
                                  [1, 1, 1])


def test_stream_must_be_none_on_cpu():
    with pytest.raises(ValueError, match="stream"):
        weft.ones(2).__dlpack__(stream=1)


def test_numpy_memory_outlives_the_array():
    n = np.arange(500, dtype=np.float64)
    x = weft.from_dlpack(n)
    del n
    gc.collect()
    junk = [np.full(500, -1.0) for _ in range(10)]
    np.testing.assert_array_equal(x.asnumpy(), np.arange(500.0))
    del junk


def test_export_waits_for_pending_writes():
    x = weft.zeros((128, 128))
    y = x + 1
    for _ in range(10):
        y = y @ weft.ones((128, 128)) / 128.0  # keeps the values at one
    a = np.from_dlpack(y)  # the export waits for the chain
    np.testing.assert_allclose(a, np.ones((128, 128)), rtol=1e-6)


def test_imported_array_works_with_operators():
    a = np.random.default_rng(3).standard_normal((4, 5))
    x = weft.from_dlpack(a)
    np.testing.assert_allclose((x @ x.T).asnumpy(), a @ a.T, rtol=1e-12)


def test_from_dlpack_of_a_weft_array():
    x = weft.array([1.0, 2.0, 3.0])
    y = weft.from_dlpack(x)
    assert y._data_ptr() == x._data_ptr()
    np.testing.assert_array_equal(y.asnumpy(), [1, 2, 3])


def test_from_dlpack_rejects_other_objects():
    with pytest.raises(TypeError, match="__dlpack__"):
        weft.from_dlpack([1, 2, 3])


def test_array_protocol():
    x = weft.array([[1.5, 2.5], [3.5, 4.5]])
    a = np.asarray(x)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    np.testing.assert_array_equal(a, [[1.5, 2.5], [3.5, 4.5]])
    np.testing.assert_array_equal(np.array(x, dtype=np.int64), [[1, 2], [3, 4]])
    # __array__ is a copy: changing it leaves the weft array as it was.
    a[0, 0] = 0
    assert x[0, 0].item() == 1.5


# ---- a producer written with ctypes: read-only tensors and the deleter contract ---------------

import ctypes  # noqa: E402


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensorVersioned))
_DLManagedTensorVersioned._fields_ = [
    ("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
    ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]

_VERSIONED_NAME = b"dltensor_versioned"  # the capsule keeps a pointer to its name
_READ_ONLY = 1


class _Producer:
    """Lends `values` (a float64 NumPy array) as a versioned capsule; counts deleter calls."""

    def __init__(self, values, read_only):
        self.values = values
        self.deleted = 0
        self.shape = (ctypes.c_int64 * values.ndim)(*values.shape)
        self.deleter = _DELETER(self._delete)
        m = _DLManagedTensorVersioned()
        m.version = _DLPackVersion(1, 0)
        m.deleter = self.deleter
        m.flags = _READ_ONLY if read_only else 0
        m.dl_tensor = _DLTensor(values.ctypes.data, _DLDevice(1, 0), values.ndim,
                                _DLDataType(2, 64, 1), self.shape, None, 0)
        self.managed = m

    def _delete(self, ptr):
        assert ctypes.addressof(ptr.contents) == ctypes.addressof(self.managed)
        self.deleted += 1

    def capsule(self):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), _VERSIONED_NAME, None)


def test_deleter_runs_once_after_the_last_use():
    p = _Producer(np.arange(6.0).reshape(2, 3), read_only=False)
    x = weft.from_dlpack(p.capsule())
    v = x[1]
    y = x * 2
    del x
    gc.collect()
    weft.waitall()
    assert p.deleted == 0  # the view still uses the memory
    np.testing.assert_array_equal(v.asnumpy(), [3, 4, 5])
    np.testing.assert_array_equal(y.asnumpy(), np.arange(6.0).reshape(2, 3) * 2)
    del v
    gc.collect()
    weft.waitall()
    assert p.deleted == 1


def test_failed_import_leaves_the_tensor_with_its_producer():
    p = _Producer(np.arange(6.0).reshape(2, 3), read_only=False)
    strides = (ctypes.c_int64 * 2)(1, 2)
    p.managed.dl_tensor.strides = strides
    cap = p.capsule()
    with pytest.raises(ValueError, match="strided"):
        weft.from_dlpack(cap)
    assert p.deleted == 0
    assert '"dltensor_versioned"' in repr(cap)  # not consumed


def test_read_only_tensor():
    p = _Producer(np.arange(4.0), read_only=True)
    x = weft.from_dlpack(p.capsule())
    assert x._read_only
    np.testing.assert_array_equal((x + 1).asnumpy(), [1, 2, 3, 4])  # reading is fine
    with pytest.raises(ValueError, match="read-only"):
        x += 1
    with pytest.raises(ValueError, match="read-only"):
        weft.op.relu(weft.ones(4, dtype="float64"), out=x)
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 5.0
    np.testing.assert_array_equal(p.values, [0, 1, 2, 3])
    # A DLPack 0.x capsule cannot carry the flag: the legacy export is refused.
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__()
    cap = x.__dlpack__(max_version=(1, 0))
    y = weft.from_dlpack(cap)
    assert y._read_only
    del x, y, cap
    gc.collect()
    weft.waitall()
    assert p.deleted == 1


def test_round_trip_through_numpy_is_zero_copy():
    # np.from_dlpack gives a read-only array, which NumPy < 2.1 cannot export through DLPack:
    # weft imports it through the buffer protocol, still without copying, as read-only.
    y = weft.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = np.from_dlpack(y)
    z = weft.from_dlpack(t)
    assert z._data_ptr() == y._data_ptr()
    np.testing.assert_array_equal(z.asnumpy(), np.arange(6).reshape(2, 3))
    y += 1  # the writable original still writes the shared memory
    np.testing.assert_array_equal(z.asnumpy(), np.arange(1, 7).reshape(2, 3))


def test_read_only_numpy_array():
    import sys
    a = np.arange(8.0)
    a.flags.writeable = False
    refs = sys.getrefcount(a)
    x = weft.from_dlpack(a)
    assert x._read_only and x._data_ptr() == a.ctypes.data
    np.testing.assert_array_equal((x * 2).asnumpy(), a * 2)
    with pytest.raises(ValueError, match="read-only"):
        x += 1
    with pytest.raises(ValueError, match="strided"):
        weft.from_dlpack(a[::2])
    assert sys.getrefcount(a) > refs  # weft holds the array while it uses the memory
    del x
    gc.collect()
    weft.waitall()
    assert sys.getrefcount(a) == refs

NUMPY_2 = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1)


@pytest.mark.skipif(not NUMPY_2, reason="NumPy < 2.1 does not pass max_version")
def test_numpy_2_consumes_a_versioned_capsule():
    x = weft.array(np.arange(4, dtype=np.float32))
    seen = []

    class Spy:
        def __dlpack__(self, **kwargs):
            seen.append(kwargs.get("max_version"))
            return x.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    a = np.from_dlpack(Spy())
    assert seen and seen[0] is not None and seen[0][0] >= 1
    assert a.ctypes.data == x._data_ptr()
    np.testing.assert_array_equal(a, [0, 1, 2, 3])
    a[0] = 5  # a writable versioned import stays writable in NumPy 2
    assert x[0].item() == 5


@pytest.mark.skipif(not NUMPY_2, reason="NumPy < 2.1 cannot export versioned capsules")
def test_versioned_import_from_numpy_2_keeps_the_read_only_flag():
    a = np.arange(6, dtype=np.float32)
    assert "dltensor_versioned" in repr(a.__dlpack__(max_version=(1, 0)))
    x = weft.from_dlpack(a)
    assert x._data_ptr() == a.ctypes.data and not x._read_only
    ro = np.arange(3, dtype=np.float32)
    ro.flags.writeable = False
    y = weft.from_dlpack(ro)
    assert y._read_only and y._data_ptr() == ro.ctypes.data
    np.testing.assert_array_equal(y.asnumpy(), [0, 1, 2])
    with pytest.raises(Exception, match="read-only"):
        y += 1
