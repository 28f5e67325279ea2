#!/usr/bin/env python3
"""The PyTorch peer of `bench/run.sh dist`: torch.distributed allreduce (sum) over gloo on
float32 tensors from 4 B to 64 MiB, with the process group taken from mpirun.

    MASTER_PORT=<free port> mpirun -np 2 /usr/bin/python3 bench/dist/torch_gloo.py [--quick]

Rank and size come from OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE; the rendezvous is
127.0.0.1 on port WEFT_GLOO_PORT, else MASTER_PORT (default 29511). Each size is warmed up, then
timed for about 0.3 s (0.05 s with --quick, which also stops at 1 MiB), at least 3 iterations;
rank 0 prints one line per size:

    torch_gloo bytes=<B> us=<median microseconds> busbw=<GB/s>

busbw is the bus bandwidth of a ring allreduce, bytes * 2 * (n - 1) / n / time, comparable across
group sizes (NCCL's convention).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch
import torch.distributed as td

SIZES = [4, 64, 1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
QUICK_SIZES = [4, 64, 1 << 10, 16 << 10, 256 << 10, 1 << 20]


def agree(value: int) -> int:
    """Rank 0's value on every rank (iteration counts must match: each is a collective)."""
    t = torch.tensor([value], dtype=torch.int64)
    td.broadcast(t, src=0)
    return int(t.item())


def time_size(nbytes: int, target_s: float, warmup: int) -> float:
    """Median microseconds of one allreduce of `nbytes` bytes of float32."""
    x = torch.ones(max(nbytes // 4, 1), dtype=torch.float32)
    for _ in range(warmup):
        td.all_reduce(x)
    td.barrier()
    start = time.perf_counter()
    td.all_reduce(x)
    one = time.perf_counter() - start
    iters = agree(max(3, math.ceil(target_s / max(one, 1e-7))))
    times = []
    td.barrier()
    for _ in range(iters):
        start = time.perf_counter()
        td.all_reduce(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes up to 1 MiB, fewer iterations")
    args = ap.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("WEFT_GLOO_PORT") or os.environ.get("MASTER_PORT",
                                                                                 "29511")
    td.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)
    sizes = QUICK_SIZES if args.quick else SIZES
    target = 0.05 if args.quick else 0.3
    warmup = 2 if args.quick else 5
    for nbytes in sizes:
        us = time_size(nbytes, target, warmup)
        busbw = nbytes * 2 * (size - 1) / size / (us * 1e-6) / 1e9
        if rank == 0:
            print(f"torch_gloo bytes={nbytes} us={us:.1f} busbw={busbw:.3f}", flush=True)
    td.barrier()
    td.destroy_process_group()


if __name__ == "__main__":
    main()
