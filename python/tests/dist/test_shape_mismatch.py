"""Ranks that disagree on a tensor's shape: every rank gets DistError naming the tensor. The
group may be unusable afterwards, so this runs after every other test (and scripts/dist_test.sh
runs it in its own mpirun)."""
import numpy as np
import pytest

import weft
import weft.dist as dist


@pytest.mark.breaks_group
def test_a_shape_mismatch_is_a_dist_error_naming_the_tensor_on_every_rank():
    # A matching allreduce first, so the group is known to work before the mismatch.
    ok = dist.allreduce(weft.ones((2,)), name="mismatch.before")
    np.testing.assert_array_equal(ok.asnumpy(), [dist.size()] * 2)
    shape = (4,) if dist.rank() == 1 else (3,)
    y = dist.allreduce(weft.ones(shape), name="mismatch.tensor")
    with pytest.raises(dist.DistError, match="mismatch.tensor"):
        y.wait_to_read()
    assert issubclass(dist.DistError, weft.WeftError)
    with pytest.raises(weft.EngineError):  # waitall reports the failure once more
        weft.waitall()
