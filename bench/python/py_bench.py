"""weft's Python benchmark: what an operation costs from Python, and an MLP training step, against
PyTorch in the same process and MXNet 1.9.1 in its own.

    python bench/python/py_bench.py [--quick] [--threads N] [--mxnet-python PATH] [--only NAME]

Workloads (each prints a `compare` line; ratio = weft / peer, below 1: weft is faster):
  py_tiny_add        `c = a + b` on 1-element float32 arrays, COUNT times in a Python loop, then
                     a wait (weft: c.wait_to_read(); PyTorch runs each add before returning).
                     Microseconds per operation, median of the repetitions.
  py_tiny_add_mxnet  the same loop with `mxnet.nd` in a subprocess (mxnet_tiny_add.py, run by
                     --mxnet-python; skipped with a message when that interpreter is absent),
                     against weft's repetitions timed just before it.
  py_mlp_step        one SGD step of a 784-512-512-10 MLP at batch 64: forward, softmax
                     cross-entropy (summed over the batch), backward, `w -= lr * w.grad` on
                     every parameter; weft waits for the step (weft.waitall()). Milliseconds per
                     step, median over blocks of steps.
  py_tiny_add breakdown (full mode, weft only): the loop measured with parts taken away, to
                     split the per-operation time into the Python loop, nanobind's call and
                     result object, and weft's C++ invoke + push; and the same add called by
                     name (weft._weft._invoke, weft.op.elemwise_add).

Threads: --threads N (default: every core) sets PyTorch's intra-op threads and weft's engine
workers (WEFT_CPU_WORKERS, unless already set); weft's intra-op threads stay adaptive (at most
one per core), so both use the same cores. The peer is Debian's PyTorch (python3-torch): PyPI's
CPU-only wheel is not reachable from the machines this runs on, and PyPI's default wheel carries
CUDA.

`--quick` (CI): fewer operations and repetitions, seconds in all. Each measurement also prints
`other=` (CPU time other processes used, as a share of the machine) and `steal=` (time the
hypervisor took): figures taken with either above a few percent are disturbed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- machine and interference ----------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def mem_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


class Interference:
    """CPU time used by other processes and stolen by the hypervisor, as shares of the machine's
    capacity between construction and report() (Linux /proc/stat; 'n/a' elsewhere)."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        busy = (user + nice + system + irq + softirq) / hz
        total = (user + nice + system + idle + iowait + irq + softirq + steal) / hz
        t = os.times()
        return busy, steal / hz, total, t.user + t.system

    def report(self):
        end = self._sample()
        if self.start is None or end is None or end[2] <= self.start[2]:
            return "other=n/a steal=n/a"
        total = end[2] - self.start[2]
        other = (end[0] - self.start[0]) - (end[3] - self.start[3])
        steal = end[1] - self.start[1]
        return f"other={max(other, 0) / total:.0%} steal={steal / total:.0%}"


def blas_libraries():
    """The BLAS/LAPACK shared libraries mapped into this process (PyTorch's matrix products go
    through whichever libblas.so.3 Debian's alternatives point at)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path)
                if path.startswith("/") and ("blas" in name or "lapack" in name):
                    found.add(os.path.realpath(path))
    except OSError:
        return "unknown"
    return ", ".join(sorted(found)) or "none mapped"


def median(values):
    return statistics.median(values)


def spread(values):
    return f"min={min(values):.4g} max={max(values):.4g} n={len(values)}"


def compare(name, weft_value, peer_name, peer_value, note):
    print(f"compare {name} weft={weft_value:.4g} {peer_name}={peer_value:.4g} "
          f"ratio={weft_value / peer_value:.3f}  # {note}", flush=True)


# ---- workloads -------------------------------------------------------------------------------

def loop_weft(a, b, count):
    start = time.perf_counter()
    for _ in range(count):
        c = a + b
    c.wait_to_read()
    return time.perf_counter() - start


def loop_torch(a, b, count):
    start = time.perf_counter()
    for _ in range(count):
        c = a + b  # noqa: F841 - the result is dropped as in the weft loop
    return time.perf_counter() - start


def tiny_add(weft, torch, count, reps):
    """Per-operation time of `c = a + b`, weft and torch repetitions interleaved."""
    a, b = weft.full((1,), 1.0), weft.full((1,), 2.0)
    ta, tb = torch.ones(1), torch.ones(1)
    weft.waitall()
    loop_weft(a, b, min(count, 10000))
    loop_torch(ta, tb, min(count, 10000))
    w, t = [], []
    monitor = Interference()
    for _ in range(reps):
        w.append(loop_weft(a, b, count) / count * 1e6)
        t.append(loop_torch(ta, tb, count) / count * 1e6)
    print(f"# py_tiny_add weft us/op: {spread(w)}; torch us/op: {spread(t)}; {monitor.report()}")
    compare("py_tiny_add", median(w), "torch", median(t), f"us per op, 1-element add x{count}")


def tiny_add_mxnet(weft, mxnet_python, count, reps):
    """The tiny-add loop in MXNet (subprocess) against weft's repetitions timed right before."""
    if not mxnet_python or not os.path.exists(mxnet_python):
        print(f"# py_tiny_add_mxnet skipped: no MXNet interpreter at '{mxnet_python}' (set "
              f"WEFT_MXNET_PYTHON or --mxnet-python to a Python with mxnet 1.9.1)", flush=True)
        return
    a, b = weft.full((1,), 1.0), weft.full((1,), 2.0)
    weft.waitall()
    loop_weft(a, b, min(count, 10000))
    monitor = Interference()  # over weft's repetitions: the subprocess would count as "other"
    w = [loop_weft(a, b, count) / count * 1e6 for _ in range(reps)]
    disturbance = monitor.report()
    # The subprocess sees neither weft's development hook nor its package path.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WEFT_NATIVE_DIR")}
    proc = subprocess.run([mxnet_python, os.path.join(HERE, "mxnet_tiny_add.py"), "--count",
                           str(count), "--reps", str(reps)], capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0:
        print(f"# py_tiny_add_mxnet skipped: {mxnet_python} failed (exit {proc.returncode}): "
              f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}",
              flush=True)
        return
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    m = result["us_per_op"]
    print(f"# py_tiny_add_mxnet: MXNet {result['mxnet']} ({mxnet_python}, engine "
          f"{result['engine']}); weft us/op: {spread(w)}; mxnet us/op: {spread(m)}; weft's "
          f"repetitions: {disturbance}")
    compare("py_tiny_add_mxnet", median(w), "mxnet", median(m),
            f"us per op, 1-element add x{count}, MXNet in a subprocess")


def tiny_add_breakdown(weft, count, reps):
    """Splits weft's per-operation time by taking parts of the loop away (weft only):
    the bare Python loop; a nanobind method call that returns a new NDArray without invoking an
    operator (a._at(0), a view: the call, argument checks and the result object); and a + b
    itself. The difference between the last two is weft's C++ side: shape inference, the output
    allocation, the push, and the deletion of the previous result's variable."""
    a, b = weft.full((1,), 1.0), weft.full((1,), 2.0)
    weft.waitall()

    def bare():
        start = time.perf_counter()
        for _ in range(count):
            c = a  # noqa: F841
        return time.perf_counter() - start

    def view():
        start = time.perf_counter()
        for _ in range(count):
            c = a._at(0)  # noqa: F841
        return time.perf_counter() - start

    def prop():
        start = time.perf_counter()
        for _ in range(count):
            c = a.ndim  # noqa: F841
        return time.perf_counter() - start

    def invoke():
        start = time.perf_counter()
        for _ in range(count):
            c = invoke_native("elemwise_add", [a, b])  # noqa: F841
        c[0].wait_to_read()
        return time.perf_counter() - start

    def op_function():
        start = time.perf_counter()
        for _ in range(count):
            c = elemwise_add(a, b)
        c.wait_to_read()
        return time.perf_counter() - start

    invoke_native = weft._weft._invoke
    elemwise_add = weft.op.elemwise_add
    parts = {"loop": bare, "property": prop, "view": view,
             "add": lambda: loop_weft(a, b, count), "invoke": invoke, "op": op_function}
    for fn in parts.values():
        fn()
    times = {k: [] for k in parts}
    for _ in range(reps):
        for k, fn in parts.items():
            times[k].append(fn() / count * 1e6)
    m = {k: median(v) for k, v in times.items()}
    print(f"# py_tiny_add breakdown (us/op, medians of {reps}): Python loop {m['loop']:.3f}; "
          f"a nanobind property (a.ndim) {m['property']:.3f}; a call returning a new NDArray "
          f"(a._at(0)) {m['view']:.3f}; a + b {m['add']:.3f}", flush=True)
    print(f"#   => Python + nanobind call and result object ~{m['view'] - m['loop']:.3f}, "
          f"weft's C++ invoke + push ~{m['add'] - m['view']:.3f}, loop {m['loop']:.3f}",
          flush=True)
    print(f"#   by name: weft._weft._invoke('elemwise_add', [a, b]) {m['invoke']:.3f} (a list in "
          f"and out, the attribute cache); weft.op.elemwise_add(a, b) {m['op']:.3f} (the "
          f"generated Python function over it)", flush=True)


def count_operations(weft, fn):
    """(operators, variable deletions) that fn() runs on the engine, from a profiler trace."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        weft.profiler.start()
        fn()
        weft.profiler.stop(path)
        with open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ops = [e.get("name") for e in events if e.get("ph") == "X"]
    deletions = sum(1 for n in ops if n == "delete_var")
    return len(ops) - deletions, deletions


def mlp_step(weft, torch, steps, reps):
    """One SGD step of a 784-512-512-10 MLP at batch 64, same data and weights on both sides."""
    import numpy as np

    batch, lr = 64, 0.01
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((batch, 784), dtype=np.float32)
    label_np = rng.integers(0, 10, size=batch)
    shapes = [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)]
    scales = [0.03, 0.0, 0.04, 0.0, 0.04, 0.0]
    init = [(rng.standard_normal(s, dtype=np.float32) * k).astype(np.float32)
            for s, k in zip(shapes, scales)]

    x, label = weft.array(x_np), weft.array(label_np.astype(np.float32))
    wp = [weft.array(p) for p in init]
    for p in wp:
        p.attach_grad()
    op = weft.op

    def step_weft(wait=True):
        with weft.autograd.record():
            h = op.Activation(op.FullyConnected(x, wp[0], wp[1], num_hidden=512),
                              act_type="relu")
            h = op.Activation(op.FullyConnected(h, wp[2], wp[3], num_hidden=512),
                              act_type="relu")
            out = op.SoftmaxOutput(op.FullyConnected(h, wp[4], wp[5], num_hidden=10), label)
        out.backward()
        for p in wp:
            p -= lr * p.grad
        if wait:
            weft.waitall()

    tx, tlabel = torch.from_numpy(x_np), torch.from_numpy(label_np)
    tp = [torch.from_numpy(p.copy()).requires_grad_() for p in init]
    F = torch.nn.functional

    def step_torch():
        h = F.relu(F.linear(tx, tp[0], tp[1]))
        h = F.relu(F.linear(h, tp[2], tp[3]))
        loss = F.cross_entropy(F.linear(h, tp[4], tp[5]), tlabel, reduction="sum")
        loss.backward()
        with torch.no_grad():
            for p in tp:
                p -= lr * p.grad
                p.grad.zero_()

    # Same arithmetic on both sides: after one step the weights must agree.
    step_weft()
    step_torch()
    diff = max(float(np.abs(w.asnumpy() - t.detach().numpy()).max()) for w, t in zip(wp, tp))
    for _ in range(2):
        step_weft()
        step_torch()

    def block(fn):
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - start) / steps * 1e3

    w, t = [], []
    monitor = Interference()
    for _ in range(reps):
        w.append(block(step_weft))
        t.append(block(step_torch))
    disturbance = monitor.report()
    # What Python costs in a step: the time to push it (the call returns before the kernels
    # finish), and the number of engine operations it pushes (from the profiler).
    push = []
    for _ in range(reps):
        start = time.perf_counter()
        step_weft(wait=False)
        push.append((time.perf_counter() - start) * 1e3)
        weft.waitall()
    kernels, deletions = count_operations(weft, step_weft)
    print(f"# py_mlp_step weft ms: {spread(w)}; torch ms: {spread(t)}; blocks of {steps} steps; "
          f"weights after one step agree to {diff:.1e}; {disturbance}")
    print(f"# py_mlp_step weft: {kernels} operators and {deletions} variable deletions per "
          f"step, pushed from Python in {median(push):.3f} ms (median; execution overlaps the "
          f"pushing)", flush=True)
    print(f"# py_mlp_step PyTorch's BLAS: {blas_libraries()}", flush=True)
    compare("py_mlp_step", median(w), "torch", median(t),
            "ms, 784-512-512-10 SGD step, batch 64")


# ---- main ------------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds in all (CI)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="PyTorch intra-op threads and weft engine workers "
                             "(default: every core)")
    parser.add_argument("--mxnet-python", default=os.environ.get("WEFT_MXNET_PYTHON", ""),
                        help="interpreter with mxnet 1.9.1 (default: $WEFT_MXNET_PYTHON)")
    parser.add_argument("--count", type=int, default=0,
                        help="adds per tiny-add repetition (default 100000; 20000 with --quick)")
    parser.add_argument("--only", default="", help="run only workloads whose name contains this")
    args = parser.parse_args(argv)
    count = args.count or (20000 if args.quick else 100000)
    reps = 3 if args.quick else 7
    steps = 3 if args.quick else 10

    # Before weft starts its runtime: one engine worker per thread PyTorch gets.
    os.environ.setdefault("WEFT_CPU_WORKERS", str(args.threads))
    import weft
    import torch
    torch.set_num_threads(args.threads)

    print(f"# weft python benchmark, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, "
          f"nproc={os.cpu_count()} cpu=\"{cpu_model()}\" mem={mem_gib():.1f}GiB "
          f"kernel={platform.system()} {platform.release()}")
    print(f"# Python {platform.python_version()}; weft {weft.__version__} ({weft.__file__}), "
          f"{weft._weft._engine_info()['cpu_workers']} engine workers, adaptive intra-op "
          f"threads; PyTorch {torch.__version__} ({torch.__file__}), "
          f"{torch.get_num_threads()} intra-op threads; PyTorch is Debian's python3-torch "
          f"(PyPI's CPU-only wheel is not reachable here)", flush=True)

    def want(name):
        return not args.only or args.only in name

    if want("py_tiny_add"):
        tiny_add(weft, torch, count, reps)
    if want("py_tiny_add_mxnet"):
        tiny_add_mxnet(weft, args.mxnet_python, count, reps)
    if want("py_tiny_add_breakdown") and not args.quick:
        tiny_add_breakdown(weft, count, reps)
    if want("py_mlp_step"):
        torch.set_num_threads(args.threads)  # in case a weft kernel on this thread changed it
        mlp_step(weft, torch, steps, reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
