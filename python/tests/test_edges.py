"""Edge cases at the seams between Python and the library: empty arrays from creation functions and
from DLPack producers."""
import numpy as np
import pytest

import weft


@pytest.mark.parametrize("make", [weft.zeros, weft.ones, lambda s: weft.full(s, 7.0)])
@pytest.mark.parametrize("shape", [(3, 0), (0,), (2, 0, 4)])
def test_creation_with_a_zero_length_dimension(make, shape):
    x = make(shape)
    assert x.shape == shape and x.size == 0
    assert x.asnumpy().shape == shape


def test_empty_torch_tensor_imports_whatever_its_strides():
    torch = pytest.importorskip("torch")
    t = torch.zeros((0, 3)).t()  # an empty, non-compact view
    x = weft.from_dlpack(t)
    assert x.shape == (3, 0)
    assert x.asnumpy().shape == (3, 0)
