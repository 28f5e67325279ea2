"""weft.NDArray: creation, properties, conversions, copies and dtypes, against NumPy."""
import numpy as np
import pytest

import weft


# ---- creation --------------------------------------------------------------------------------

def test_array_from_lists_is_float32():
    x = weft.array([[1, 2, 3], [4, 5, 6]])
    assert x.dtype == np.float32
    assert x.shape == (2, 3)
    np.testing.assert_array_equal(x.asnumpy(), np.array([[1, 2, 3], [4, 5, 6]], np.float32))


def test_array_from_list_with_dtype():
    x = weft.array([1, 2, 300], dtype="int32")
    assert x.dtype == np.int32
    np.testing.assert_array_equal(x.asnumpy(), [1, 2, 300])
    y = weft.array([0.5, 1.5], dtype=np.float64)
    assert y.dtype == np.float64


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int32", "int64", "int8",
                                   "uint8", "bool"])
def test_array_from_numpy_keeps_dtype(rng, dtype):
    a = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    x = weft.array(a)
    assert x.dtype == np.dtype(dtype)
    assert x.shape == (3, 4)
    out = x.asnumpy()
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, a)


def test_array_of_a_scalar_is_0d():
    for value in (3.5, np.float64(2.25), np.array(-1.0)):
        x = weft.array(value)
        assert x.shape == ()
        assert x.ndim == 0
        assert x.size == 1
        assert x.item() == float(value)


def test_array_copies_its_input(rng):
    a = rng.standard_normal((4, 5))
    x = weft.array(a)
    expected = a.copy()
    a[:] = 0
    np.testing.assert_array_equal(x.asnumpy(), expected)


def test_array_from_a_strided_numpy_view(rng):
    a = rng.standard_normal((6, 8))
    v = a[1::2, ::3]
    np.testing.assert_array_equal(weft.array(v).asnumpy(), v)
    t = a.T
    np.testing.assert_array_equal(weft.array(t).asnumpy(), t)


def test_array_from_big_endian_numpy():
    a = np.array([[1.5, -2.0], [3.0, 4.25]], dtype=">f8")
    x = weft.array(a)
    assert x.dtype == np.float64
    np.testing.assert_array_equal(x.asnumpy(), a)
    np.testing.assert_array_equal(weft.array(np.array([7, -8], dtype=">i4")).asnumpy(), [7, -8])


def test_array_of_an_ndarray_is_a_copy():
    x = weft.array([1.0, 2.0])
    y = weft.array(x)
    assert not y.shares_storage_with(x)
    x[:] = 5
    np.testing.assert_array_equal(y.asnumpy(), [1.0, 2.0])
    assert weft.array(x, dtype="float64").dtype == np.float64


def test_asarray_returns_the_same_array():
    x = weft.array([1.0, 2.0])
    assert weft.asarray(x) is x
    assert weft.asarray(x, dtype=np.float32) is x
    y = weft.asarray(x, dtype=np.float64)
    assert y is not x and y.dtype == np.float64


@pytest.mark.parametrize("make, value", [(weft.zeros, 0), (weft.ones, 1)])
def test_zeros_ones(make, value):
    x = make((2, 3, 4))
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x.asnumpy(), np.full((2, 3, 4), value, np.float32))
    y = make(5, dtype=np.int64)
    assert y.dtype == np.int64 and y.shape == (5,)
    np.testing.assert_array_equal(y.asnumpy(), np.full(5, value))
    z = make((), dtype="float64")
    assert z.shape == () and z.item() == value


def test_full():
    x = weft.full((3, 2), 7.25)
    np.testing.assert_array_equal(x.asnumpy(), np.full((3, 2), 7.25, np.float32))
    y = weft.full((4,), -3, dtype="int32")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y.asnumpy(), [-3, -3, -3, -3])


def test_arange():
    np.testing.assert_array_equal(weft.arange(5).asnumpy(), np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(weft.arange(1, 2, 0.25).asnumpy(), np.arange(1, 2, 0.25))
    np.testing.assert_allclose(weft.arange(10, 0, -3).asnumpy(), np.arange(10, 0, -3))
    x = weft.arange(2, 7, dtype="int32")
    assert x.dtype == np.int32
    np.testing.assert_array_equal(x.asnumpy(), np.arange(2, 7))


def test_zeros_like_ones_like(rng):
    x = weft.array(rng.standard_normal((2, 5)))
    z = weft.zeros_like(x)
    o = weft.ones_like(x)
    assert z.dtype == o.dtype == np.float64
    np.testing.assert_array_equal(z.asnumpy(), np.zeros((2, 5)))
    np.testing.assert_array_equal(o.asnumpy(), np.ones((2, 5)))


def test_empty_has_shape_and_dtype():
    x = weft.empty((3, 4), dtype="int16")
    assert x.shape == (3, 4) and x.dtype == np.int16


def test_numpy_integers_as_shapes():
    assert weft.zeros(np.int64(3)).shape == (3,)
    assert weft.ones((np.int32(2), 3)).shape == (2, 3)
    assert weft.zeros(np.array([2, 4])).shape == (2, 4)


def test_bad_shape_is_a_type_error():
    with pytest.raises(TypeError, match="zeros"):
        weft.zeros("abc")
    with pytest.raises(TypeError, match="dimensions must be ints"):
        weft.zeros((2, 1.5))


# ---- random ----------------------------------------------------------------------------------

def test_seed_makes_draws_repeatable():
    weft.seed(7)
    a = weft.random.uniform(-1, 2, (500,)).asnumpy()
    b = weft.random.normal(0, 1, (500,)).asnumpy()
    weft.seed(7)
    a2 = weft.random.uniform(-1, 2, (500,)).asnumpy()
    b2 = weft.random.normal(0, 1, (500,)).asnumpy()
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    weft.seed(8)
    assert not np.array_equal(weft.random.uniform(-1, 2, (500,)).asnumpy(), a)


def test_uniform_statistics():
    weft.seed(1)
    n = 40000
    x = weft.random.uniform(-1.0, 3.0, (n,))
    assert x.dtype == np.float32 and x.shape == (n,)
    a = x.asnumpy().astype(np.float64)
    assert a.min() >= -1.0 and a.max() < 3.0
    # Mean 1, variance 16/12: five standard errors of slack.
    assert abs(a.mean() - 1.0) < 5 * np.sqrt(16 / 12 / n)
    assert abs(a.var() - 16 / 12) < 0.05
    # Every quarter of the interval gets about a quarter of the draws.
    counts = np.histogram(a, bins=4, range=(-1, 3))[0]
    assert np.all(np.abs(counts / n - 0.25) < 0.015)


def test_normal_statistics():
    weft.seed(2)
    n = 40000
    x = weft.random.normal(1.5, 2.0, (200, 200), dtype="float64")
    assert x.dtype == np.float64 and x.shape == (200, 200)
    a = x.asnumpy().ravel()
    assert abs(a.mean() - 1.5) < 5 * 2.0 / np.sqrt(n)
    assert abs(a.std() - 2.0) < 0.05
    within = np.mean(np.abs(a - 1.5) < 2.0)  # one sigma: 68.27%
    assert abs(within - 0.6827) < 0.015


def test_random_defaults():
    assert weft.random.uniform().shape == (1,)
    u = weft.random.uniform(shape=(3, 2), device=weft.cpu())
    assert u.shape == (3, 2) and u.device == weft.cpu()


# ---- properties ------------------------------------------------------------------------------

def test_properties(rng):
    x = weft.array(rng.standard_normal((3, 4, 5)).astype(np.float32))
    assert x.shape == (3, 4, 5)
    assert isinstance(x.shape, tuple)
    assert x.dtype == np.float32 and isinstance(x.dtype, np.dtype)
    assert x.device == weft.cpu()
    assert x.device == weft.Device("cpu:0")
    assert str(x.device) == "cpu:0"
    assert x.context == x.device
    assert x.size == 60
    assert x.ndim == 3
    assert len(x) == 3
    assert x.nbytes == 240


def test_len_of_0d_is_a_type_error():
    with pytest.raises(TypeError):
        len(weft.array(1.0))


def test_item():
    assert weft.array([2.5]).item() == 2.5
    v = weft.array([7], dtype="int64").item()
    assert v == 7 and isinstance(v, int)
    b = weft.array(np.array([True])).item()
    assert b is True
    with pytest.raises(ValueError, match="6 elements"):
        weft.zeros((2, 3)).item()


def test_scalar_conversions():
    assert float(weft.array([2.5])) == 2.5
    assert int(weft.array([3.0])) == 3
    assert bool(weft.array([0.0])) is False
    assert bool(weft.array([2.0])) is True


def test_asnumpy_and_tolist(rng):
    a = rng.standard_normal((2, 3))
    x = weft.array(a)
    out = x.asnumpy()
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    np.testing.assert_array_equal(out, a)
    # The result is a copy: changing it does not change the array.
    out[:] = 0
    np.testing.assert_array_equal(x.asnumpy(), a)
    assert x.tolist() == a.tolist()
    assert weft.array([1, 2], dtype="int32").tolist() == [1, 2]


def test_numpy_protocol(rng):
    a = rng.standard_normal((4, 2)).astype(np.float32)
    x = weft.array(a)
    np.testing.assert_array_equal(np.asarray(x), a)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    np.testing.assert_allclose(np.sum(np.asarray(x)), a.sum(dtype=np.float64), rtol=1e-6)


def test_repr():
    x = weft.array([[1.5, 2.0], [3.0, -4.0]])
    r = repr(x)
    assert "(2, 2)" in r and "float32" in r and "cpu" in r
    for v in ("1.5", "-4"):
        assert v in r
    assert "float64" in repr(weft.zeros(3, dtype="float64"))


# ---- copies, devices and dtypes --------------------------------------------------------------

def test_copy_is_independent(rng):
    a = rng.standard_normal((3, 3))
    x = weft.array(a)
    y = x.copy()
    assert not y.shares_storage_with(x)
    x += 1
    np.testing.assert_array_equal(y.asnumpy(), a)
    np.testing.assert_array_equal(x.asnumpy(), a + 1)


def test_copyto_array(rng):
    a = rng.standard_normal((2, 4))
    x = weft.array(a)
    y = weft.zeros((2, 4), dtype="float64")
    assert x.copyto(y) is y
    np.testing.assert_array_equal(y.asnumpy(), a)


def test_copyto_mismatched_shape_raises(rng):
    x = weft.array(rng.standard_normal((2, 4)))
    with pytest.raises(ValueError):
        x.copyto(weft.zeros((4, 2), dtype="float64"))


def test_copyto_device_and_to():
    x = weft.array([1.0, 2.0, 3.0])
    y = x.copyto(weft.cpu())
    assert isinstance(y, weft.NDArray) and not y.shares_storage_with(x)
    np.testing.assert_array_equal(y.asnumpy(), [1, 2, 3])
    assert x.to("cpu") is x
    assert x.to(weft.cpu()) is x
    assert x.as_in_context(weft.Device("cpu")) is x


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8,
                                   "float64", "int8"])
def test_astype(dtype):
    a = np.array([[0.0, 1.25, 2.75], [3.5, 100.0, 7.0]], np.float32)
    x = weft.array(a)
    y = x.astype(dtype)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.asnumpy(), a.astype(dtype))


def test_astype_same_dtype():
    x = weft.array([1.0, 2.0])
    assert x.astype(np.float32, copy=False) is x
    y = x.astype("float32")
    assert y is not x and not y.shares_storage_with(x)


def test_astype_bool():
    x = weft.array([0.0, -2.0, 0.5])
    np.testing.assert_array_equal(x.astype(bool).asnumpy(), [False, True, True])
    np.testing.assert_array_equal(x.astype("bool").asnumpy(), [False, True, True])


def test_device_objects():
    assert weft.Device("cpu") == weft.cpu()
    assert repr(weft.cpu()) == "Device('cpu:0')"
    assert weft.cuda(1) == weft.Device("cuda:1")
    assert hash(weft.Device("cpu")) == hash(weft.cpu())
    assert isinstance(weft.cuda_available(), bool)
