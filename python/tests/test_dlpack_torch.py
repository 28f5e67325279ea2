"""DLPack exchange with PyTorch (1.13 here): zero-copy both ways, memory lifetimes, refusals."""
import gc

import numpy as np
import pytest

import weft

torch = pytest.importorskip("torch")
from torch.utils import dlpack as torch_dlpack  # noqa: E402


def test_torch_and_weft_share_memory_both_ways():
    # weft -> torch
    x = weft.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = torch_dlpack.from_dlpack(x.__dlpack__())
    assert t.data_ptr() == x._data_ptr()
    t[1, 2] = -7.0
    assert x[1, 2].item() == -7.0
    x[0] = 3.0
    x.wait_to_read()
    assert torch.equal(t[0], torch.full((4,), 3.0))
    # torch.from_dlpack asks the weft array itself (__dlpack__ / __dlpack_device__).
    t2 = torch.from_dlpack(x)
    assert t2.data_ptr() == x._data_ptr()
    # torch -> weft, through the tensor's __dlpack__ and through a capsule.
    s = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    y = weft.from_dlpack(s)
    z = weft.from_dlpack(torch_dlpack.to_dlpack(s))
    assert y._data_ptr() == z._data_ptr() == s.data_ptr()
    s[0, 0] = 42.0
    assert y[0, 0].item() == 42.0 and z[0, 0].item() == 42.0
    y += 1
    y.wait_to_read()
    assert torch.equal(s, torch.tensor([[43.0, 2, 3], [4, 5, 6]], dtype=torch.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64",
                                   "uint8"])
def test_dtypes_round_trip(dtype):
    a = (np.arange(6) % 5).astype(dtype).reshape(3, 2)
    x = weft.from_dlpack(a)
    assert x.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.from_dlpack(x), a)
    t = torch.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), a)


def test_views_export_their_own_elements():
    x = weft.array(np.arange(12, dtype=np.float32).reshape(4, 3))
    np.testing.assert_array_equal(np.from_dlpack(x[1:3]), [[3, 4, 5], [6, 7, 8]])
    np.testing.assert_array_equal(np.from_dlpack(x[2]), [6, 7, 8])
    t = torch.from_dlpack(x[3])
    t[0] = 100.0
    assert x[3, 0].item() == 100.0


def test_0d_round_trip():
    x = weft.array(5.0)
    assert np.from_dlpack(x).shape == ()
    assert torch.from_dlpack(x).shape == torch.Size([])
    assert weft.from_dlpack(np.array(2.5)).shape == ()


def test_consumed_capsule_cannot_be_imported_twice():
    cap = torch_dlpack.to_dlpack(torch.ones(3))
    weft.from_dlpack(cap)
    with pytest.raises(ValueError, match="used_dltensor"):
        weft.from_dlpack(cap)
    cap2 = weft.ones(2).__dlpack__(max_version=(1, 0))
    weft.from_dlpack(cap2)
    with pytest.raises(ValueError, match="already consumed"):
        weft.from_dlpack(cap2)


def test_strided_torch_tensor_is_refused():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).T
    with pytest.raises(ValueError, match="strided"):
        weft.from_dlpack(t)
    # Refusing left the tensor usable and unchanged.
    assert torch.equal(t.contiguous(), torch.tensor([[0.0, 3], [1, 4], [2, 5]]))
    np.testing.assert_array_equal(weft.from_dlpack(t.contiguous()).asnumpy(),
                                  [[0, 3], [1, 4], [2, 5]])


def test_copy_true_exports_a_copy():
    x = weft.array([1.0, 2.0])
    t = torch_dlpack.from_dlpack(x.__dlpack__(copy=True))
    assert t.data_ptr() != x._data_ptr()
    t[0] = 9.0
    assert x[0].item() == 1.0


def test_torch_memory_outlives_the_tensor():
    t = torch.arange(1000, dtype=torch.float32)
    x = weft.from_dlpack(t)
    del t
    gc.collect()
    # Allocate and fill other memory that would reuse a freed block.
    junk = [torch.full((1000,), -1.0) for _ in range(10)]
    np.testing.assert_array_equal(x.asnumpy(), np.arange(1000, dtype=np.float32))
    np.testing.assert_array_equal((x + 1).asnumpy(), np.arange(1, 1001, dtype=np.float32))
    del junk


def test_weft_memory_outlives_the_array():
    x = weft.array(np.arange(100, dtype=np.float32))
    t = torch.from_dlpack(x)
    a = np.from_dlpack(weft.array(np.arange(50.0)))
    del x
    gc.collect()
    junk = [weft.full((100,), -1.0) for _ in range(10)]
    weft.waitall()
    np.testing.assert_array_equal(t.numpy(), np.arange(100, dtype=np.float32))
    np.testing.assert_array_equal(a, np.arange(50.0))
    del junk


def test_array_of_a_torch_tensor_is_a_copy():
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    x = weft.array(t)
    assert x.dtype == np.float64 and x._data_ptr() != t.data_ptr()
    t[0, 0] = 50.0
    assert x[0, 0].item() == 0.0
    # Tensors DLPack cannot import as they are are copied through NumPy.
    np.testing.assert_array_equal(weft.array(t.T).asnumpy(), t.T.numpy())
    np.testing.assert_array_equal(weft.array(torch.tensor([True, False])).asnumpy(),
                                  [True, False])
