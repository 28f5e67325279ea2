#!/usr/bin/env python3
"""Runs an MXNet symbol JSON with PyTorch (CPU) and times it: the peer of `weft replay`.

  torch_replay.py GRAPH.json --params FILE.params --input data=1x3x224x224 [--batch N]
                  [--warmup W] [--iters K] [--save-outputs DIR] [--threads T]
                  [--mode auto|eager|trace|freeze|ofi] [--channels-last] [--seed S]

Prints `torch_ms=<median ms>` (and a detail line before it). --input is NAME=SHAPE (1x3x224x224,
random uniform in [-1, 1) from --seed) or NAME=FILE.npy; --batch replaces the first dimension of
shape inputs and must match .npy inputs. Heads are written as DIR/k.npy (float32, C order) with
--save-outputs. Without --params, --random-params generates weights (weft's distributions) and
--save-params writes them.

Modes: eager walks the graph in Python; trace records it with torch.jit.trace; freeze also runs
torch.jit.freeze, which inlines the weights and folds BatchNorm into the convolutions; ofi runs
torch.jit.optimize_for_inference on the frozen module (oneDNN layouts for the convolutions).
--channels-last converts the input and the 4-D weights to NHWC memory format. auto (the default)
prepares ofi, ofi + channels-last and freeze + channels-last, times --probe runs of each and
times the fastest; the detail line names the mode it kept. --threads defaults to 2 (the
machine's cores), WEFT_TORCH_THREADS and WEFT_TORCH_MODE override the defaults.
"""

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mxnet_to_torch as m2t  # noqa: E402

MODES = ("auto", "eager", "trace", "freeze", "ofi")
# What --mode auto tries: the frozen variants that won on some model here (ResNet-50 and
# MobileNetV2 run fastest with optimize_for_inference, Inception-v3 frozen in channels-last,
# whose pooling and concats would make ofi convert layouts back and forth).
AUTO_CANDIDATES = (("ofi", False), ("ofi", True), ("freeze", True))


def parse_input_spec(spec, batch, rng):
    if "=" not in spec:
        raise m2t.GraphError(f"--input {spec}: expected NAME=SHAPE or NAME=FILE.npy")
    name, value = spec.split("=", 1)
    if value.endswith(".npy"):
        a = np.load(value)
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        if batch > 0 and (a.ndim == 0 or a.shape[0] != batch):
            raise m2t.GraphError(f"--input {name}: {value} has shape {a.shape}, --batch is {batch}")
        return name, np.ascontiguousarray(a)
    try:
        shape = [int(d) for d in value.replace(",", "x").split("x")]
    except ValueError:
        raise m2t.GraphError(f"--input {spec}: expected a shape like 1x3x224x224 or a .npy file") from None
    if batch > 0:
        shape[0] = batch
    return name, rng.uniform(-1, 1, size=shape).astype(np.float32)


def build(args):
    graph = m2t.load_graph(args.graph)
    rng = np.random.default_rng(args.seed)
    inputs = dict(parse_input_spec(s, args.batch, rng) for s in args.input)
    if args.params:
        params = m2t.load_params(args.params)
    elif args.random_params:
        params = m2t.random_params(graph, {k: v[:1] for k, v in inputs.items()}, args.seed)
    else:
        raise m2t.GraphError("give --params FILE (or --random-params)")
    if args.save_params:
        m2t.save_params(args.save_params, params)
    names = list(inputs)
    params = dict(params)
    xs = tuple(torch.from_numpy(inputs[n]) for n in names)
    m2t.MXNetGraphModule(graph, params, names)  # fail early on missing arrays
    return graph, lambda: m2t.MXNetGraphModule(graph, params, names).eval(), xs


def prepare(module, xs, mode, channels_last):
    """Returns a callable run(*xs) for the mode, and the inputs converted for it."""
    if channels_last:
        for name, buf in list(module.named_buffers()):
            if buf.dim() == 4:
                setattr(module, name, buf.contiguous(memory_format=torch.channels_last))
        xs = tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in xs)
    if mode == "eager":
        return module, xs
    with torch.no_grad(), warnings.catch_warnings():
        # The trace is specialised to these input shapes on purpose (shape arithmetic in Python).
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(module, xs, check_trace=False)
        if mode == "trace":
            return traced, xs
        frozen = torch.jit.freeze(traced.eval())
        if mode == "freeze":
            return frozen, xs
        return torch.jit.optimize_for_inference(frozen), xs


def choose(module_factory, xs, probe):
    """--mode auto: prepares each candidate, times `probe` runs of each after one warm-up run and
    keeps the fastest (by median). Returns (fn, xs, label)."""
    best = None
    for mode, cl in AUTO_CANDIDATES:
        fn, x2 = prepare(module_factory(), xs, mode, cl)
        times, _ = time_it(fn, x2, 1, probe)
        med = statistics.median(times)
        if best is None or med < best[0]:
            best = (med, fn, x2, mode + (" channels_last" if cl else ""))
    return best[1], best[2], best[3]


def time_it(fn, xs, warmup, iters):
    outs = None
    with torch.inference_mode():
        for _ in range(warmup):
            outs = fn(*xs)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            outs = fn(*xs)
            times.append((time.perf_counter() - t0) * 1e3)
    return times, outs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("graph", help="MXNet symbol JSON")
    p.add_argument("--params", help="MXNet .params file (arg:/aux: keys)")
    p.add_argument("--input", action="append", default=[], help="NAME=SHAPE or NAME=FILE.npy (repeatable)")
    p.add_argument("--batch", type=int, default=-1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--save-outputs", help="write head k as DIR/k.npy")
    p.add_argument("--threads", type=int, default=int(os.environ.get("WEFT_TORCH_THREADS", "2")))
    p.add_argument("--mode", choices=MODES, default=os.environ.get("WEFT_TORCH_MODE", "auto"),
                   help="auto (default) times the candidates in AUTO_CANDIDATES and keeps the fastest")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format (explicit modes)")
    p.add_argument("--probe", type=int, default=2, help="timed runs per candidate of --mode auto")
    p.add_argument("--seed", type=int, default=1, help="seed of shape inputs (and of --random-params)")
    p.add_argument("--random-params", action="store_true", help="generate weights when --params is not given")
    p.add_argument("--save-params", help="write the weights used as an MXNet .params file")
    args = p.parse_args(argv)
    if not args.input:
        p.error("at least one --input NAME=SHAPE|FILE.npy is needed")
    if args.iters < 1:
        p.error("--iters must be >= 1")

    torch.set_num_threads(args.threads)
    try:
        graph, module_factory, xs = build(args)
        if args.mode == "auto":
            fn, xs, label = choose(module_factory, xs, args.probe)
        else:
            fn, xs = prepare(module_factory(), xs, args.mode, args.channels_last)
            label = args.mode + (" channels_last" if args.channels_last else "")
        times, outs = time_it(fn, xs, args.warmup, args.iters)
    except (m2t.GraphError, NotImplementedError) as e:
        print(f"torch_replay: error: {e}", file=sys.stderr)
        return 2
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    med = statistics.median(times)
    srt = sorted(times)
    p90 = srt[min(len(srt) - 1, max(0, -(-9 * len(srt) // 10) - 1))]
    shapes = ", ".join("x".join(str(d) for d in o.shape) for o in outs)
    print(f"torch {os.path.basename(args.graph)}: torch {torch.__version__}, mode={label}"
          f"{' (auto)' if args.mode == 'auto' else ''}, threads={torch.get_num_threads()}, "
          f"outputs [{shapes}], p90_ms={p90:.3f} over {args.iters} iterations ({args.warmup} warm-up)")
    if args.save_outputs:
        os.makedirs(args.save_outputs, exist_ok=True)
        for k, o in enumerate(outs):
            np.save(os.path.join(args.save_outputs, f"{k}.npy"),
                    np.ascontiguousarray(o.detach().to(torch.float32).contiguous().numpy()))
    print(f"torch_ms={med:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
