#!/usr/bin/env python3
"""Replays a model through weft's graph executor from Python: bind, run forward on a random
input, print the top-5 classes of the first sample and the latency over a few iterations.

    python examples/python/replay_model.py resnet18
    python examples/python/replay_model.py mobilenetv2 --batch 4 --iters 20
    python examples/python/replay_model.py ../shared/models/X-symbol.json --input data=1x3x224x224
    python examples/python/replay_model.py resnet-18-symbol.json --params resnet-18-0000.params
    python examples/python/replay_model.py resnet18 --profile trace.json

MODEL is a model weft builds itself (weft.graph.model_names(): mlp, resnet18, resnet50,
mobilenetv2, ...) or an MXNet `-symbol.json` file. Weights come from `--params` (an MXNet
`.params` file) or are drawn at random (He initialisation, seeded, BatchNorm statistics neutral),
so without `--params` the classes printed mean nothing, but the run is the real one. The executor
plans memory once at bind; `forward` pushes the whole graph and returns at once, and reading an
output waits. `--profile trace.json` records the timed iterations with weft.profiler (a Chrome
trace; open it in https://ui.perfetto.dev).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import weft


def parse_inputs(items):
    """`NAME=1x3x224x224` strings -> {name: shape}."""
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--input {item!r}: expected NAME=D1xD2x..., e.g. data=1x3x224x224")
    return shapes


def load_model(model, batch, inputs):
    """(symbol, input shapes): a bundled model by name, or a -symbol.json file."""
    if os.path.exists(model) or model.endswith(".json"):
        if not os.path.exists(model):
            raise SystemExit(f"{model}: no such file")
        net = weft.graph.load(model)
        if not inputs and "data" not in net.list_arguments():
            raise SystemExit(f"{model} has no input named 'data': give each input's shape with "
                             f"--input NAME=SHAPE")
        return net, inputs or {"data": (batch, 3, 224, 224)}
    names = weft.graph.model_names()
    if model not in names:
        raise SystemExit(f"unknown model '{model}': give a -symbol.json file or one of "
                         f"{', '.join(names)}")
    net, shapes = weft.model(model, batch=batch)
    shapes.update(inputs)
    return net, shapes


def random_params(net, shapes, seed, device="cpu"):
    """Weights for every argument that is not an input, and neutral auxiliary states: He-normal
    weights, unit BatchNorm scales, zero biases, moving means 0 and variances 1. Drawn on the CPU
    (every build has its random kernels there), then copied to `device`."""
    weft.seed(seed)
    arg_shapes, _, aux_shapes = net.infer_shape(**shapes)
    args = {}
    for name, shape in zip(net.list_arguments(), arg_shapes):
        if name in shapes or name.endswith("label"):
            continue
        if name.endswith(("gamma", "moving_var", "running_var")):
            args[name] = weft.ones(shape)
        elif name.endswith(("moving_mean", "running_mean", "beta", "bias")):
            args[name] = weft.zeros(shape)
        else:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
            args[name] = weft.random.normal(0.0, (2.0 / max(fan_in, 1)) ** 0.5, shape=shape)
    aux = {}
    for name, shape in zip(net.list_auxiliary_states(), aux_shapes):
        aux[name] = weft.ones(shape) if name.endswith("var") else weft.zeros(shape)
    return ({k: v.to(device) for k, v in args.items()},
            {k: v.to(device) for k, v in aux.items()})


def token_inputs(net):
    """{input name: vocabulary size} for variables that feed an Embedding (token ids)."""
    nodes = json.loads(net.tojson())["nodes"]
    out = {}
    for node in nodes:
        attrs = node.get("attrs", node.get("param", {}))
        if node["op"] == "Embedding" and node["inputs"]:
            source = nodes[node["inputs"][0][0]]
            if source["op"] == "null":
                out[source["name"]] = int(attrs.get("input_dim", 1))
    return out


def top5(probs):
    """(class, value) of the five largest entries of a 1-d NumPy array."""
    idx = np.argsort(probs)[::-1][:5]
    return [(int(i), float(probs[i])) for i in idx]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a bundled model's name or a -symbol.json file")
    parser.add_argument("--params", help="an MXNet .params file with the weights")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=SHAPE",
                        help="an input's shape, e.g. data=1x3x224x224 (repeatable)")
    parser.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--iters", type=int, default=10, help="timed runs (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="for weights and inputs (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--profile", metavar="TRACE.json",
                        help="write a Chrome trace of the timed iterations")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        parser.error("--batch and --iters must be positive, --warmup not negative")
    if args.device.startswith("cuda") and not weft.cuda_available():
        parser.error(f"--device {args.device}: this weft build has no CUDA or sees no GPU")

    net, shapes = load_model(args.model, args.batch, parse_inputs(args.input))
    if args.params:
        arg_params, aux_params = weft.graph.load_params(args.params, device=args.device)
        source = args.params
    else:
        arg_params, aux_params = random_params(net, shapes, args.seed, args.device)
        source = f"random (seed {args.seed})"
    data_shapes = {k: v for k, v in shapes.items() if k not in arg_params}

    start = time.perf_counter()
    ex = net.bind(device=args.device, args=arg_params, aux=aux_params, shapes=data_shapes)
    bind_ms = (time.perf_counter() - start) * 1e3
    n_weights = sum(int(np.prod(a.shape)) for a in arg_params.values())
    print(f"weft {weft.__version__}: {args.model}, {len(net.list_arguments())} arguments, "
          f"{n_weights / 1e6:.2f} M weights from {source}")
    print(f"inputs {data_shapes}, outputs {ex.output_shapes}, bound in {bind_ms:.0f} ms on "
          f"{args.device}")

    # Random inputs: token ids for inputs of an Embedding, uniform [-1, 1) for other float
    # inputs; labels stay zero.
    rng = np.random.default_rng(args.seed)
    tokens = token_inputs(net)
    feed = {}
    for name, shape in data_shapes.items():
        if name.endswith("label") or name not in ex.arg_dict:
            continue
        dtype = np.dtype(ex.arg_dict[name].dtype)
        if name in tokens:
            feed[name] = rng.integers(0, tokens[name], size=shape).astype(dtype)
        elif np.issubdtype(dtype, np.floating):
            feed[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)

    for _ in range(args.warmup):
        ex.forward(**feed)[0].wait_to_read()
    if args.profile:
        weft.profiler.start()
    times = []
    for _ in range(args.iters):
        start = time.perf_counter()
        outputs = ex.forward(**feed)
        for out in outputs:
            out.wait_to_read()
        times.append((time.perf_counter() - start) * 1e3)
    if args.profile:
        events = weft.profiler.stop(args.profile)
        print(f"wrote {args.profile} ({events} events; open it in https://ui.perfetto.dev)")

    first = outputs[0].asnumpy()
    row = first.reshape(first.shape[0], -1)[0] if first.ndim > 1 else first
    print(f"top-5 of sample 0 (output '{net.list_outputs()[0]}', shape {first.shape}):")
    for rank, (cls, value) in enumerate(top5(row), 1):
        print(f"  {rank}. class {cls:5d}  {value:.6f}")
    print(f"latency over {args.iters} iterations (batch {args.batch}): median "
          f"{statistics.median(times):.2f} ms, min {min(times):.2f} ms, max {max(times):.2f} ms")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, NotImplementedError, weft.WeftError) as e:  # ShapeError: a ValueError
        sys.exit(f"error: {e}")
