"""weft.dist's collectives under mpirun, each against a NumPy reference: every rank's data is a
deterministic function of its rank, so every rank computes what the whole group holds and the
result it must get."""
import os
import time
import uuid

import numpy as np
import pytest

import weft
import weft.dist as dist

DTYPES = ["float32", "float64", "int32"]
OPS = ["sum", "mean", "max", "min", "prod"]
TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12),
       "int32": dict(rtol=0, atol=0)}


def rank_data(rank, shape, dtype, salt, op="sum"):
    """Rank `rank`'s values: seeded by (salt, rank), small enough that a product over ranks
    neither overflows nor underflows, and for int32 mean a multiple of the group size so the
    mean is exact."""
    rng = np.random.default_rng([salt, rank])
    dtype = np.dtype(dtype)
    if dtype.kind == "i":
        if op == "prod":
            return rng.choice(np.array([-2, -1, 1, 2], dtype=dtype), size=shape)
        values = rng.integers(-50, 50, size=shape).astype(dtype)
        return values * dtype.type(dist.size()) if op == "mean" else values
    if op == "prod":
        return (rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def reference(op, arrays):
    stacked = np.stack([a.astype(np.float64) for a in arrays])
    out = {"sum": stacked.sum(0), "mean": stacked.mean(0), "max": stacked.max(0),
           "min": stacked.min(0), "prod": stacked.prod(0)}[op]
    return out


def everyone(shape, dtype, salt, op="sum"):
    return [rank_data(r, shape, dtype, salt, op) for r in range(dist.size())]


def test_the_group_is_the_mpi_world():
    assert dist.initialized()
    assert dist.rank() == int(os.environ["OMPI_COMM_WORLD_RANK"])
    assert dist.size() == int(os.environ["OMPI_COMM_WORLD_SIZE"])
    assert dist.local_size() == int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"])
    assert dist.local_rank() == int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    assert "mpi" in dist.backend().lower()


@pytest.mark.parametrize("in_place", [True, False], ids=["in_place", "out_of_place"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_matches_numpy(dtype, op, in_place):
    salt = 100 + DTYPES.index(dtype) * 10 + OPS.index(op)
    data = everyone((3, 5), dtype, salt, op)
    mine = data[dist.rank()]
    x = weft.array(mine)
    name = f"allreduce.{dtype}.{op}.{in_place}"
    if in_place:
        y = dist.allreduce(x, op=op, name=name)
        assert y is x or y._storage_id == x._storage_id
    else:
        out = weft.zeros((3, 5), dtype=dtype)
        y = dist.allreduce(x, out=out, op=op, name=name)
        assert y._storage_id == out._storage_id
    got = y.asnumpy()
    assert got.dtype == np.dtype(dtype)
    want = reference(op, data)
    if dtype == "int32":
        np.testing.assert_array_equal(got, want.astype(np.int64))
    else:
        np.testing.assert_allclose(got, want, **TOL[dtype])
    if not in_place:
        np.testing.assert_array_equal(x.asnumpy(), mine)  # the input is left as it was


def test_unnamed_allreduces_match_in_program_order():
    data = [everyone((7,), "float32", 300 + k) for k in range(3)]
    ys = [dist.allreduce(weft.array(d[dist.rank()])) for d in data]
    for d, y in zip(data, ys):
        np.testing.assert_allclose(y.asnumpy(), reference("sum", d), **TOL["float32"])


def test_allreduce_of_numpy_input_returns_a_new_array():
    data = everyone((4,), "float64", 310)
    y = dist.allreduce(data[dist.rank()], op="mean", name="numpy.input")
    assert isinstance(y, weft.NDArray)
    np.testing.assert_allclose(y.asnumpy(), reference("mean", data), **TOL["float64"])


def test_an_unknown_operation_is_a_value_error_before_anything_is_issued():
    with pytest.raises(ValueError, match="median"):
        dist.allreduce(weft.zeros((2,)), op="median", name="never")


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("root", ["first", "last"])
def test_broadcast_gives_every_rank_the_roots_array(root, dtype):
    root = 0 if root == "first" else dist.size() - 1
    data = everyone((2, 3, 4), dtype, 400 + root)
    x = weft.array(data[dist.rank()])
    y = dist.broadcast(x, root=root, name=f"broadcast.{root}.{dtype}")
    np.testing.assert_array_equal(y.asnumpy(), data[root])
    np.testing.assert_array_equal(x.asnumpy(), data[root])  # in place


@pytest.mark.parametrize("given_out", [False, True], ids=["allocated", "given_out"])
def test_allgather_concatenates_in_rank_order(given_out):
    data = everyone((2, 3), "float32", 500)
    out = weft.zeros((2 * dist.size(), 3)) if given_out else None
    y = dist.allgather(weft.array(data[dist.rank()]), out=out, name=f"allgather.{given_out}")
    assert y.shape == (2 * dist.size(), 3)
    np.testing.assert_array_equal(y.asnumpy(), np.concatenate(data))


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reduce_scatter_gives_each_rank_its_slice(op):
    n = dist.size()
    data = everyone((2 * n, 3), "float64", 600 + OPS.index(op))
    y = dist.reduce_scatter(weft.array(data[dist.rank()]), op=op, name=f"reduce_scatter.{op}")
    assert y.shape == (2, 3)
    want = reference(op, data)[2 * dist.rank():2 * dist.rank() + 2]
    np.testing.assert_allclose(y.asnumpy(), want, **TOL["float64"])


def test_reduce_scatter_rejects_rows_not_divisible_by_the_group_size():
    with pytest.raises(ValueError, match="multiple"):
        dist.reduce_scatter(weft.zeros((dist.size() + 1, 2)), name="never.scatter")


def test_barrier_waits_for_every_rank(tmp_path_factory):
    # A folder every rank can name: rank 0 draws a token and broadcasts it.
    token = weft.array(np.array([uuid.uuid4().int & 0x7FFFFFFF if dist.rank() == 0 else 0],
                                dtype=np.int64))
    token = int(dist.broadcast(token, name="barrier.token").asnumpy()[0])
    folder = f"/tmp/weft-dist-barrier-{token}"
    os.makedirs(folder, exist_ok=True)
    time.sleep(0.2 * dist.rank())  # later ranks arrive later
    open(os.path.join(folder, str(dist.rank())), "w").close()
    dist.barrier(name="barrier.arrived")
    assert sorted(os.listdir(folder)) == sorted(str(r) for r in range(dist.size()))
    dist.barrier(name="barrier.checked")
    if dist.rank() == 0:
        for r in range(dist.size()):
            os.remove(os.path.join(folder, str(r)))
        os.rmdir(folder)


def test_many_small_allreduces_in_different_orders_are_matched_by_name_and_fused():
    sizes = [1 + (k * 37) % 200 for k in range(48)]
    data = [everyone((s,), "float32", 700 + k) for k, s in enumerate(sizes)]
    order = list(range(len(sizes)))
    if dist.rank() % 2 == 1:
        order.reverse()
    before = dist.stats()
    xs = {}
    for k in order:
        xs[k] = dist.allreduce(weft.array(data[k][dist.rank()]), op="sum", name=f"small.{k}")
    for k in range(len(sizes)):
        np.testing.assert_allclose(xs[k].asnumpy(), reference("sum", data[k]), **TOL["float32"])
    after = dist.stats()
    assert after["collectives"] - before["collectives"] >= len(sizes)
    assert after["fused_batches"] > before["fused_batches"], after
    assert after["transport_calls"] - before["transport_calls"] < len(sizes), (before, after)


def test_tensors_larger_than_the_fusion_buffer_reduce_correctly():
    # 8 MiB and 3 MiB against 1 MiB fusion buffers, plus 600 KiB ones that pair up.
    shapes = [(2048, 1024), (768, 1024), (150, 1024), (150, 1024), (150, 1024)]
    data = [everyone(s, "float32", 800 + k) for k, s in enumerate(shapes)]
    order = list(range(len(shapes)))
    if dist.rank() % 2 == 1:
        order.reverse()
    before = dist.stats()
    ys = {k: dist.allreduce(weft.array(data[k][dist.rank()]), op="mean", name=f"large.{k}")
          for k in order}
    for k in range(len(shapes)):
        np.testing.assert_allclose(ys[k].asnumpy(), reference("mean", data[k]), rtol=1e-5,
                                   atol=1e-6)
    after = dist.stats()
    payload = sum(int(np.prod(s)) * 4 for s in shapes)
    assert after["bytes_reduced"] - before["bytes_reduced"] >= payload


def test_priorities_do_not_change_results():
    data = [everyone((16,), "float32", 900 + k) for k in range(6)]
    ys = [dist.allreduce(weft.array(d[dist.rank()]), name=f"prio.{k}", priority=k % 3)
          for k, d in enumerate(data)]
    for d, y in zip(data, ys):
        np.testing.assert_allclose(y.asnumpy(), reference("sum", d), **TOL["float32"])


def test_allreduce_gradients_averages_and_broadcast_parameters_copies_rank0():
    shapes = {"dense1_weight": (4, 3), "dense1_bias": (4,), "dense0_weight": (3, 5)}
    grads = {k: everyone(s, "float32", 1000 + i) for i, (k, s) in enumerate(shapes.items())}
    mine = [(k, weft.array(v[dist.rank()])) for k, v in grads.items()]
    dist.allreduce_gradients(mine)
    for k, g in mine:
        np.testing.assert_allclose(g.asnumpy(), reference("mean", grads[k]), **TOL["float32"])

    params = {k: everyone(s, "float32", 1100 + i) for i, (k, s) in enumerate(shapes.items())}
    mine = {k: weft.array(v[dist.rank()]) for k, v in params.items()}
    dist.broadcast_parameters(mine)
    for k, p in mine.items():
        np.testing.assert_array_equal(p.asnumpy(), params[k][0])
