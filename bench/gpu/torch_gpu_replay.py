#!/usr/bin/env python3
"""PyTorch's side of `bench/run.sh gpu-replay`: an MXNet symbol JSON converted by
bench/replay/mxnet_to_torch.py, with the weights weft used (--params), run on cuda:0 in several
forms, each timed with CUDA events after warm-up (median of --iters):

  eager          the converted module as it is
  channels_last  the module and input in NHWC memory format
  cuda_graph     the eager module captured once with torch.cuda.graph and replayed
  compile        torch.compile(mode="max-autotune") (only when --forms names it: minutes to build)

  torch_gpu_replay.py GRAPH --params P --input NAME=FILE.npy [--input ...]
                      [--dtype float32|bfloat16|float16]
                      [--forms eager,channels_last,cuda_graph] [--warmup W] [--iters K]

Prints `torch_<form>=<ms>` per form (`n/a` with the reason on a `#` line when a form fails) and
`torch_max_memory_mb=<MiB>` (torch.cuda.max_memory_allocated over all forms). fp32 runs without
TF32, as weft's kernels do; cudnn.benchmark is on (PyTorch's best eager setting). A 16-bit
--dtype is `module.to(dtype)` of the float32 weights (BatchNorm's statistics included, PyTorch's
plain form; weft keeps them float32) with the float32 inputs cast the same way.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
import mxnet_to_torch as m2t  # noqa: E402

FORMS = ("eager", "channels_last", "cuda_graph", "compile")


def timed(fn, warmup, iters, cuda):
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        if not cuda:  # a dry run of the script on a machine without a GPU
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def to_channels_last(module, xs):
    module = module.to(memory_format=torch.channels_last)
    for name, buf in list(module.named_buffers()):
        if buf.dim() == 4:
            setattr(module, name, buf.contiguous(memory_format=torch.channels_last))
    return module, tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
                         for x in xs)


def prepare(form, factory, xs):
    module = factory()
    if form == "channels_last":
        module, xs = to_channels_last(module, xs)
        return lambda: module(*xs)
    if form == "eager":
        return lambda: module(*xs)
    if form == "cuda_graph":
        static = tuple(x.clone() for x in xs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm up on a side stream, as torch.cuda.graph requires
                module(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            module(*static)
        return graph.replay
    if form == "compile":
        compiled = torch.compile(module, mode="max-autotune")
        return lambda: compiled(*xs)
    raise ValueError(form)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("graph")
    p.add_argument("--params", required=True)
    p.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeatable)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--forms", default="eager,channels_last,cuda_graph")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--device", default="cuda:0", help="cuda:N (cpu: a dry run of this script)")
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    try:
        graph = m2t.load_graph(args.graph)
        params = dict(m2t.load_params(args.params))
        names, xs = [], []
        for spec in args.input:
            name, path = spec.split("=", 1)
            names.append(name)
            a = torch.from_numpy(np.load(path))
            xs.append((a.to(dtype) if a.is_floating_point() else a).to(dev))
        xs = tuple(xs)

        def factory():
            return m2t.MXNetGraphModule(graph, params, names).eval().to(dev).to(dtype)

        factory()  # fail early on what the converter cannot express
    except Exception as e:  # the converter's GraphError, or no device: reported as n/a
        print(f"# torch_gpu_replay: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return 2
    with torch.inference_mode():
        for form in args.forms.split(","):
            if form not in FORMS:
                p.error(f"unknown form {form}")
            try:
                ms = timed(prepare(form, factory, xs), args.warmup, args.iters, cuda)
                print(f"torch_{form}={ms:.4f}")
            except Exception as e:  # a form that does not work here is reported, not fatal
                print(f"# torch {form}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                print(f"torch_{form}=n/a")
    if cuda:
        print(f"torch_max_memory_mb={torch.cuda.max_memory_allocated() / 1048576:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
