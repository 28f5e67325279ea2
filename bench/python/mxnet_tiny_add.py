"""MXNet's side of py_bench.py's per-operation benchmark, run in its own interpreter (the one of
an MXNet 1.9.1 virtual environment): `c = a + b` on 1-element float32 `mxnet.nd` arrays, COUNT
times, then `c.wait_to_read()`; REPS repetitions after one warm-up.

    python mxnet_tiny_add.py --count 100000 --reps 5

Prints one JSON object: {"mxnet": version, "engine": MXNET_ENGINE_TYPE or its default,
"us_per_op": [one figure per repetition]}. Imports nothing from weft.
"""
import argparse
import json
import os
import time

import mxnet as mx


def run(a, b, count):
    """Seconds for `count` adds and the final wait."""
    start = time.perf_counter()
    for _ in range(count):
        c = a + b
    c.wait_to_read()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    a = mx.nd.full((1,), 1.0, dtype="float32")
    b = mx.nd.full((1,), 2.0, dtype="float32")
    mx.nd.waitall()
    run(a, b, min(args.count, 10000))
    times = [run(a, b, args.count) / args.count * 1e6 for _ in range(args.reps)]
    print(json.dumps({
        "mxnet": mx.__version__,
        "engine": os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice (default)"),
        "us_per_op": times,
    }))


if __name__ == "__main__":
    main()
