#!/usr/bin/env python3
"""Runs an MXNet symbol JSON with MXNet 1.9.1 (CPU) and times it: a peer of `weft replay`.

Run with the Python of the venv made by tests/mxnet/setup_venv.sh:

  mxnet_replay.py GRAPH.json --params FILE.params --input NAME=FILE.npy [--input ...]
                  [--warmup W] [--iters K] [--save-outputs DIR] [--form auto|FORM]
                  [--threads auto|T] [--logits-graph G2 --save-logits DIR2]

Prints a detail line, then `mxnet_ms=<median ms> p90_ms=<ms> form=<form> threads=<T>`. Heads are written as
DIR/k.npy (float32) with --save-outputs. Arguments that are neither in --params nor given with
--input (the labels of SoftmaxOutput heads, which the forward pass ignores) are bound as zeros.

Forms: MXNet runs the graph either through an Executor (Symbol.bind, the Module API's path) or
through a CachedOp (a gluon SymbolBlock hybridized with static_alloc and static_shape, the path
of exported Gluon models), each with or without the MKL-DNN subgraph backend. With it, the
symbol is partitioned by `Symbol.optimize_for("MKLDNN", args, aux)` before binding (convolution
+ BatchNorm + activation / sum become `_sg_mkldnn_conv` nodes, FullyConnected + activation
`_sg_mkldnn_fully_connected`; BatchNorm is folded into the weights at the first run); the detail
line gives the node counts before and after. MXNET_SUBGRAPH_BACKEND is set to NONE for every
bind so that a plain form really is plain and a partitioned one is not partitioned twice.
  executor-mkldnn, cachedop-mkldnn   MKL-DNN subgraph fusion (MXNet's best form for inference)
  executor, cachedop                 the graph as written (still MKL-DNN kernels per operator)
auto (the default) prepares both MKL-DNN forms, times --probe runs of each after one warm-up
run and keeps the fastest; when neither can run the graph it falls back to the plain forms, and
the detail line says so.

Threads: MXNet fixes its OpenMP thread count at start-up (OMP_NUM_THREADS; unset, it takes half
the processors on x86, i.e. 1 on a 2-vCPU machine). --threads auto (the default) runs the form
probe above in one child process per count (1 and all processors), then times the fastest
(threads, form) pair; the detail line gives the probes. WEFT_MXNET_THREADS and WEFT_MXNET_FORM
override the defaults.

Timing as `weft replay`: the inputs are copied in once; each iteration is one forward pass
(inference mode) followed by mx.nd.waitall(); median (and p90) of --iters runs after --warmup.
--logits-graph G2 runs G2 (a copy of the graph with more heads; mxnet_to_torch.py logits-graph)
once in the form kept and writes its heads to --save-logits.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

mx = None  # imported by main() once OMP_NUM_THREADS is settled (MXNet reads it at start-up)

FORMS = ("executor-mkldnn", "cachedop-mkldnn", "executor", "cachedop")
AUTO = ("executor-mkldnn", "cachedop-mkldnn")
FALLBACK = ("executor", "cachedop")


def node_count(sym):
    return len(json.loads(sym.tojson())["nodes"])


def load_arrays(path):
    args, aux = {}, {}
    for key, value in mx.nd.load(path).items():
        kind, _, name = key.partition(":")
        if not name:
            kind, name = "arg", key
        (aux if kind == "aux" else args)[name] = value
    return args, aux


class Runner:
    """One prepared form: run() does one forward pass and returns the heads (not synchronised)."""

    def __init__(self, sym, form, params, inputs):
        args_in, aux_in = params
        ctx = mx.cpu()
        self.form = form
        self.nodes_before = node_count(sym)
        shapes = {n: a.shape for n, a in inputs.items()}
        arg_shapes, _, aux_shapes = sym.infer_shape_partial(**shapes)
        args = {}
        for n, s in zip(sym.list_arguments(), arg_shapes):
            if n in inputs:
                args[n] = mx.nd.array(inputs[n], ctx=ctx)
            elif n in args_in:
                args[n] = args_in[n].as_in_context(ctx)
            elif s is not None and all(d > 0 for d in s):
                args[n] = mx.nd.zeros(s, ctx=ctx)  # a label: the forward pass ignores it
            else:
                raise ValueError("no array for argument '%s' and its shape cannot be inferred" % n)
        aux = {}
        for n, s in zip(sym.list_auxiliary_states(), aux_shapes):
            if n not in aux_in:
                raise ValueError("--params has no array for auxiliary state '%s'" % n)
            aux[n] = aux_in[n].as_in_context(ctx)
        if form.endswith("-mkldnn"):
            sym = sym.optimize_for("MKLDNN", args, aux, ctx=ctx)
        self.nodes_after = node_count(sym)
        if form.startswith("executor"):
            exe = sym.bind(ctx, args=args, aux_states=aux, grad_req="null")
            self.run = lambda: exe.forward(is_train=False)
        else:
            data_names = sym.list_arguments()
            data_names = [n for n in data_names if n not in args_in]  # inputs and labels
            block = mx.gluon.SymbolBlock(sym, [mx.sym.var(n) for n in data_names])
            params_all = dict(args, **aux)
            for name, p in block.collect_params().items():
                p._load_init(params_all[name], ctx)
            block.hybridize(static_alloc=True, static_shape=True)
            feed = [args[n] for n in data_names]

            def run():
                out = block(*feed)
                return out if isinstance(out, (list, tuple)) else [out]

            self.run = run


def time_it(run, warmup, iters):
    outs = None
    for _ in range(warmup):
        outs = run()
        mx.nd.waitall()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        outs = run()
        mx.nd.waitall()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, outs


def first_line(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    pick = [ln for ln in lines if "Error" in ln or "Check failed" in ln]
    return ((pick or lines or [type(e).__name__])[-1])[:200]


def prepare(sym, forms, params, inputs, probe, always_probe):
    """Prepares each form and runs it once (some forms fail only when they run: MKL-DNN fusion on
    MobileFaceNet binds, then fails in the forward pass); when more than one form can run, or
    with always_probe, also times `probe` runs of each. Returns (fastest runner, {form: failure
    reason}); the runner's probe_ms is its median."""
    best, failed = None, {}
    for form in forms:
        try:
            r = Runner(sym, form, params, inputs)
            timed = probe if len(forms) > 1 or always_probe else 0
            times, _ = time_it(r.run, 1, timed)
            med = statistics.median(times) if times else 0.0
            r.probe_ms = med
        except (mx.base.MXNetError, ValueError, KeyError) as e:
            failed[form] = first_line(e)
            continue
        if best is None or med < best[0]:
            best = (med, r)
    return (best[1] if best else None), failed


def save(outs, d):
    os.makedirs(d, exist_ok=True)
    for k, o in enumerate(outs):
        np.save(os.path.join(d, "%d.npy" % k), np.ascontiguousarray(o.asnumpy().astype(np.float32)))


def probe_threads(argv, candidates):
    """--threads auto: runs this script once per thread count in a child process (MXNet fixes its
    OpenMP thread count at start-up) with --probe-only, and returns (threads, form, {threads:
    probe ms}) of the fastest."""
    results = {}
    for t in candidates:
        env = dict(os.environ, OMP_NUM_THREADS=str(t))
        r = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv +
                           ["--threads", str(t), "--probe-only"], env=env, capture_output=True, text=True)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("probe_ms=")]
        note = [ln[len("probe_note: "):] for ln in r.stdout.splitlines() if ln.startswith("probe_note: ")]
        if r.returncode != 0 or not line:
            sys.stderr.write(r.stderr[-2000:])
            continue
        words = dict(w.split("=", 1) for w in line[-1].split())
        results[t] = (float(words["probe_ms"]), words["form"], "".join(note))
    if not results:
        return None, None, {}, ""
    best = min(results, key=lambda t: results[t][0])
    return best, results[best][1], {t: v[0] for t, v in results.items()}, results[best][2]


def main(argv=None):
    global mx
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("graph", help="MXNet symbol JSON")
    p.add_argument("--params", required=True, help="MXNet .params file (arg:/aux: keys)")
    p.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeatable)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--probe", type=int, default=3, help="timed runs per candidate of auto")
    p.add_argument("--form", choices=("auto",) + FORMS, default=os.environ.get("WEFT_MXNET_FORM", "auto"))
    p.add_argument("--threads", default=os.environ.get("WEFT_MXNET_THREADS", "auto"),
                   help="OpenMP threads: auto (default) or a count")
    p.add_argument("--probe-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--save-outputs", help="write head k as DIR/k.npy")
    p.add_argument("--logits-graph", help="also run this graph once (in the form kept)")
    p.add_argument("--save-logits", help="write the heads of --logits-graph as DIR/k.npy")
    args = p.parse_args(argv)
    if not args.input:
        p.error("at least one --input NAME=FILE.npy is needed")
    if args.iters < 1:
        p.error("--iters must be >= 1")
    thread_note = ""
    if args.threads == "auto":
        cores = os.cpu_count() or 1
        candidates = sorted({1, cores})
        rest, skip = [], False
        for a in argv:  # argv without --threads (the children get their own)
            if skip or a == "--threads" or a.startswith("--threads="):
                skip = a == "--threads"
                continue
            rest.append(a)
        threads, form, probes, probe_note = probe_threads(rest, candidates)
        if threads is None:
            print("mxnet_replay: error: no thread count could run the graph", file=sys.stderr)
            return 1
        if len(candidates) > 1:
            thread_note = ", threads chosen from probes " + ", ".join(
                "%d: %.3f ms" % kv for kv in sorted(probes.items()))
        thread_note += probe_note
        args.threads, args.form = str(threads), form
    os.environ["OMP_NUM_THREADS"] = str(int(args.threads))
    os.environ["MXNET_SUBGRAPH_BACKEND"] = "NONE"
    os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
    warnings.filterwarnings("ignore", message="Cannot decide type")
    import mxnet
    mx = mxnet

    inputs = {}
    for spec in args.input:
        name, sep, path = spec.partition("=")
        if not sep or not path.endswith(".npy"):
            p.error("--input %s: expected NAME=FILE.npy" % spec)
        inputs[name] = np.load(path).astype(np.float32)

    sym = mx.sym.load(args.graph)
    params = load_arrays(args.params)
    forms = AUTO if args.form == "auto" else (args.form,)
    runner, failed = prepare(sym, forms, params, inputs, args.probe, args.probe_only)
    note = ""
    if runner is None and args.form == "auto":
        note = "; fell back to the plain forms (MKL-DNN fusion failed: %s)" % "; ".join(
            "%s: %s" % kv for kv in failed.items())
        runner, more = prepare(sym, FALLBACK, params, inputs, args.probe, args.probe_only)
        failed.update(more)
    if runner is None:
        for form, why in failed.items():
            print("mxnet_replay: error: %s: %s" % (form, why), file=sys.stderr)
        return 1
    if failed and not note:
        note = "; not usable: " + "; ".join("%s: %s" % kv for kv in failed.items())
    if args.probe_only:
        print("probe_ms=%.6f form=%s" % (runner.probe_ms, runner.form))
        if note:
            print("probe_note: " + note)
        return 0
    times, outs = time_it(runner.run, args.warmup, args.iters)
    srt = sorted(times)
    p90 = srt[min(len(srt) - 1, max(0, -(-9 * len(srt) // 10) - 1))]
    shapes = ", ".join("x".join(str(d) for d in o.shape) for o in outs[:8])
    if len(outs) > 8:
        shapes += ", ... (%d heads)" % len(outs)
    print("mxnet %s: mxnet %s, form=%s (nodes %d -> %d), threads=%s%s, outputs [%s], over %d "
          "iterations (%d warm-up)%s" % (os.path.basename(args.graph), mx.__version__, runner.form,
                                          runner.nodes_before, runner.nodes_after, args.threads,
                                          thread_note, shapes, args.iters, args.warmup, note))
    if args.save_outputs:
        save(outs, args.save_outputs)
    if args.logits_graph:
        lr = Runner(mx.sym.load(args.logits_graph), runner.form, params, inputs)
        louts = lr.run()
        mx.nd.waitall()
        if args.save_logits:
            save(louts, args.save_logits)
    print("mxnet_ms=%.3f p90_ms=%.3f form=%s threads=%s" % (statistics.median(times), p90, runner.form,
                                                           args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
