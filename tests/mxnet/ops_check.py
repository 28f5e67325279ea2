#!/usr/bin/env python3
"""Checks weft's operators against real MXNet 1.9.1, forward and backward, element by element.

Run with the Python of a venv that has mxnet==1.9.1 and numpy==1.23.5 (tests/mxnet/setup_venv.sh):

    $VENV/bin/python tests/mxnet/ops_check.py --driver BUILD/tests/mxnet/weft_op_driver \
        [--out DIR] [--seed S] [--filter REGEX] [--keep]

For every case (an operator, attributes and seeded random inputs; the case lists live in
cases_*.py beside this file) it runs MXNet's imperative API (mx.nd + mx.autograd, recording and
calling backward with random head gradients), writes the inputs and head gradients as .npy, runs
all cases through weft in one process of weft_op_driver (ndarray `invoke` + autograd), and compares
every output, input gradient and mutated auxiliary state per element:

    |weft - mxnet| <= atol + rtol * |mxnet|     (NaN matches NaN, inf matches the same inf)

with the tolerances of TOLERANCES below. Prints one row per case and a closing
"N passed, N failed" line; writes summary.json to --out; exits 1 on any failure.

A case marked `expected` has a documented difference (docs/MXNET.md, "Exceptions"), limited to
the arrays it names (`expected_arrays`, e.g. the input gradient only): a mismatch there is
reported as "expected difference" and does not fail the run; a mismatch anywhere else does.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases_common as cc  # noqa: E402

# Per-op tolerances (rtol, atol), applied to outputs and gradients alike. Inputs are float32 in
# roughly [-2, 2]. Elementwise math is exact up to a rounding or two; reductions and
# accumulations (convolution, inner products, recurrences, normalisation) get room for a
# different summation order (oneDNN in both, but not the same kernels or blockings).
TOLERANCES = {
    # elementwise, shape and indexing: exact or one rounding
    "default": (1e-5, 1e-6),
    # transcendental elementwise (exp, log, erf, ...): a few ulps, different libm / vector code
    "Activation": (1e-5, 1e-6),
    "LeakyReLU": (2e-5, 1e-6),
    "_power": (2e-5, 1e-6),
    "broadcast_power": (2e-5, 1e-6),
    "_power_scalar": (2e-5, 1e-6),
    "_rpower_scalar": (2e-5, 1e-6),
    # softmax family: one exp and a sum per row
    "softmax": (1e-5, 1e-6),
    "log_softmax": (1e-5, 1e-6),
    "SoftmaxActivation": (1e-5, 1e-6),
    "SoftmaxOutput": (1e-5, 1e-6),
    # broadcasting: the gradient of a broadcast input is a sum over the broadcast axes
    **{f"broadcast_{name}": (1e-5, 1e-5) for name in ("add", "sub", "mul", "div", "power", "maximum", "minimum")},
    # reductions over up to a few hundred terms
    "sum": (1e-5, 1e-5),
    "mean": (1e-5, 1e-6),
    "add_n": (1e-5, 1e-6),
    "Pooling": (1e-5, 1e-5),
    "UpSampling": (1e-5, 1e-5),
    # accumulations (dot products of up to ~500 terms), batch statistics, recurrences
    "Convolution": (1e-4, 1e-4),
    "Deconvolution": (1e-4, 1e-4),
    "FullyConnected": (1e-4, 1e-4),
    "dot": (1e-4, 1e-4),
    "batch_dot": (1e-4, 1e-4),
    "BatchNorm": (1e-4, 1e-4),
    "LayerNorm": (1e-4, 1e-4),
    "LRN": (1e-4, 1e-5),
    "RNN": (1e-4, 1e-4),
    "_contrib_CTCLoss": (1e-4, 1e-4),
    "Embedding": (1e-5, 1e-6),
}


def tolerance(case):
    if case.tol is not None:
        return case.tol
    return TOLERANCES.get(case.op, TOLERANCES["default"])


def compare(name, got, want, rtol, atol):
    """Returns (ok, max_abs, max_rel, message) for one array pair."""
    if got is None:
        return False, float("inf"), float("inf"), f"{name}: weft wrote nothing"
    if tuple(got.shape) != tuple(want.shape):
        return False, float("inf"), float("inf"), f"{name}: shape {got.shape} != mxnet {want.shape}"
    if got.size == 0:
        return True, 0.0, 0.0, ""
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
    special = both_nan | same_inf
    with np.errstate(invalid="ignore"):
        err = np.where(special, 0.0, np.abs(g - w))
        err = np.where(np.isnan(err), np.inf, err)
        rel = err / np.maximum(np.abs(np.where(special, 1.0, w)), 1e-30)
    bad = err > atol + rtol * np.abs(np.where(special, 0.0, w))
    max_abs = float(err.max())
    max_rel = float(np.where(np.abs(w) > atol, rel, 0.0).max()) if np.any(np.abs(w) > atol) else 0.0
    if np.any(bad):
        idx = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), g.shape)
        return False, max_abs, max_rel, (f"{name}: {int(bad.sum())}/{g.size} elements off, worst at "
                                         f"{tuple(int(i) for i in idx)}: weft {g[idx]!r} mxnet {w[idx]!r}")
    return True, max_abs, max_rel, ""


def run_mxnet(case, mx):
    """Runs the case through MXNet; fills case.mx_outputs, mx_grads, mx_dumps, head_grads."""
    rng = case.rng
    if case.reference is not None:
        case.mx_outputs = [np.asarray(o) for o in case.reference(case.inputs)]
        return
    nd_inputs = [mx.nd.array(a, dtype=a.dtype) for a in case.inputs]
    grads = case.grad_inputs if case.backward else []
    for i in grads:
        nd_inputs[i].attach_grad()
    fn = case.mx_call or cc.mx_op(mx, case.mx_name or case.op)
    attrs = dict(case.attrs)
    if case.backward:
        with mx.autograd.record(train_mode=case.is_train):
            outs = fn(*nd_inputs, **attrs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        case.head_grads = [rng.standard_normal(o.shape).astype(o.dtype) for o in outs]
        mx.autograd.backward(outs, [mx.nd.array(h, dtype=h.dtype) for h in case.head_grads],
                             train_mode=case.is_train)
        case.mx_grads = {i: nd_inputs[i].grad.asnumpy() for i in grads}
    else:
        scope = mx.autograd.train_mode() if case.is_train else mx.autograd.predict_mode()
        with scope:
            outs = fn(*nd_inputs, **attrs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    case.mx_outputs = [o.asnumpy() for o in outs]
    case.mx_dumps = {i: nd_inputs[i].asnumpy() for i in case.dump_inputs}


def write_case(case, index, workdir):
    prefix = os.path.join(workdir, f"c{index:04d}_")
    paths = []
    for i, a in enumerate(case.inputs):
        p = f"{prefix}input{i}.npy"
        np.save(p, a)
        paths.append(p)
    head = []
    for i, h in enumerate(case.head_grads or []):
        p = f"{prefix}head{i}.npy"
        np.save(p, h)
        head.append(p)
    attrs = {k: str(v) for k, v in case.attrs.items()}
    case.prefix = prefix
    return {"id": case.id, "op": case.op, "attrs": attrs, "inputs": paths, "is_train": case.is_train,
            "backward": case.backward, "grad_inputs": list(case.grad_inputs) if case.backward else [],
            "head_grads": head, "dump_inputs": list(case.dump_inputs), "out_prefix": prefix}


def load(path):
    return np.load(path) if os.path.exists(path) else None


def judge(case, result):
    """Compares weft's files with MXNet's arrays; returns a summary dict.

    status: "pass"; "expected difference" when every mismatch is in an array that the case's
    documented exception covers (case.expected, and case.expected_arrays unless None); "FAIL".
    """
    rtol, atol = tolerance(case)
    row = {"op": case.op, "case": case.name, "max_abs": 0.0, "max_rel": 0.0, "status": "pass",
           "expected_difference": case.expected, "message": ""}
    problems = []  # (array name or None, message)
    if not result.get("ok", False):
        problems.append((None, "weft error: " + result.get("error", "no result")))
    else:
        pairs = []
        if result["num_outputs"] != len(case.mx_outputs):
            problems.append((None, f"weft has {result['num_outputs']} outputs, mxnet {len(case.mx_outputs)}"))
        for i, want in enumerate(case.mx_outputs):
            pairs.append((f"out{i}", load(f"{case.prefix}out{i}.npy"), want))
        for i, want in sorted((case.mx_grads or {}).items()):
            pairs.append((f"grad{i}", load(f"{case.prefix}grad{i}.npy"), want))
        for i, want in sorted(case.mx_dumps.items()):
            pairs.append((f"aux{i}", load(f"{case.prefix}in{i}.npy"), want))
        for name, got, want in pairs:
            if name in case.skip_compare:
                continue
            ok, a, r, msg = compare(name, got, want, rtol, atol)
            row["max_abs"] = max(row["max_abs"], a)
            row["max_rel"] = max(row["max_rel"], r)
            if not ok:
                problems.append((name, msg))
        if case.check is not None and not problems:
            outs = [load(f"{case.prefix}out{i}.npy") for i in range(result["num_outputs"])]
            grads = {i: load(f"{case.prefix}grad{i}.npy") for i in case.grad_inputs} if case.backward else {}
            msg = case.check(case, outs, grads)
            if msg:
                problems.append((None, msg))
    if problems:
        excused = case.expected is not None and all(
            case.expected_arrays is None or name in case.expected_arrays for name, _ in problems)
        row["status"] = "expected difference" if excused else "FAIL"
        row["message"] = "; ".join(msg for _, msg in problems)
    return row


def print_markdown(rows, ops):
    """Per-operator summary: cases, worst errors over passing comparisons, documented exceptions."""
    print("\n| op | cases | max abs err | max rel err | result |\n|---|---|---|---|---|")
    for op in ops:
        mine = [r for r in rows if r["op"] == op]
        clean = [r for r in mine if r["status"] == "pass"]
        worst_abs = max((r["max_abs"] for r in clean), default=0.0)
        worst_rel = max((r["max_rel"] for r in clean), default=0.0)
        fails = sum(r["status"] == "FAIL" for r in mine)
        exps = sorted({r["expected_difference"].split(":")[0] for r in mine if r["status"] == "expected difference"})
        result = "pass" if not fails else f"{fails} FAIL"
        if exps:
            result += " (" + ", ".join(exps) + ")"
        print(f"| {op} | {len(mine)} | {worst_abs:.2g} | {worst_rel:.2g} | {result} |")
    print()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", required=True, help="path of the weft_op_driver executable")
    ap.add_argument("--out", default=None, help="folder for summary.json (default: none written)")
    ap.add_argument("--seed", type=int, default=0, help="seed of inputs and attribute draws")
    ap.add_argument("--filter", default=None, help="run only cases whose 'op/case' matches this regex")
    ap.add_argument("--keep", action="store_true", help="keep the work folder of .npy files")
    ap.add_argument("--verbose", action="store_true", help="print passing cases' messages too")
    ap.add_argument("--markdown", action="store_true", help="also print a per-operator Markdown table")
    args = ap.parse_args(argv)

    t0 = time.time()
    try:
        import mxnet as mx  # noqa: E402  (imported late: --help works without it)
    except ImportError as e:
        print(f"ops_check: cannot import mxnet with {sys.executable}: {e}")
        return 2
    if not os.access(args.driver, os.X_OK):
        print(f"ops_check: the driver '{args.driver}' is not an executable file")
        return 2

    mx.random.seed(args.seed)
    cases = cc.all_cases(args.seed)
    if args.filter:
        pat = re.compile(args.filter)
        cases = [c for c in cases if pat.search(c.id)]
    workdir = tempfile.mkdtemp(prefix="weft_ops_check_")
    rows = []
    driver_cases = []
    setup_errors = {}
    for index, case in enumerate(cases):
        try:
            run_mxnet(case, mx)
        except Exception as e:  # an MXNet error is a broken case, reported as a failure
            setup_errors[case.id] = f"mxnet error: {e}".splitlines()[0]
            continue
        driver_cases.append(write_case(case, index, workdir))
    t_mx = time.time() - t0
    cases_path = os.path.join(workdir, "cases.json")
    results_path = os.path.join(workdir, "results.json")
    with open(cases_path, "w") as f:
        json.dump(driver_cases, f)
    t1 = time.time()
    proc = subprocess.run([args.driver, cases_path, results_path], capture_output=True, text=True)
    t_weft = time.time() - t1
    if proc.returncode not in (0, 1) or not os.path.exists(results_path):
        print(proc.stdout + proc.stderr)
        print(f"ops_check: weft_op_driver failed with exit code {proc.returncode}")
        return 2
    with open(results_path) as f:
        results = {r["id"]: r for r in json.load(f)}
    for case in cases:
        if case.id in setup_errors:
            rows.append({"op": case.op, "case": case.name, "max_abs": float("nan"), "max_rel": float("nan"),
                         "status": "FAIL", "expected_difference": case.expected,
                         "message": setup_errors[case.id]})
        else:
            rows.append(judge(case, results.get(case.id, {})))

    passed = failed = expected = 0
    width = max(len(f"{r['op']} {r['case']}") for r in rows) if rows else 10
    print(f"{'op / case':<{width}}  {'max abs err':>11}  {'max rel err':>11}  result")
    for r in rows:
        status = r["status"]
        if status == "pass":
            passed += 1
        elif status == "expected difference":
            expected += 1
        else:
            failed += 1
        print(f"{r['op'] + ' ' + r['case']:<{width}}  {r['max_abs']:11.3g}  {r['max_rel']:11.3g}  {status}")
        if r["message"] and (status != "pass" or args.verbose):
            print(f"    {r['message'][:600]}")
            if r["expected_difference"] and status != "pass":
                print(f"    documented: {r['expected_difference']}")
    ops = sorted({r["op"] for r in rows})
    if args.markdown:
        print_markdown(rows, ops)
    print(f"\n{len(ops)} operators, {len(rows)} cases; mxnet {t_mx:.1f} s, weft {t_weft:.1f} s; "
          f"{expected} documented differences (counted as passed)")
    print(f"ops_check: {passed + expected} passed, {failed} failed")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        summary = {"mxnet_version": mx.__version__, "numpy_version": np.__version__, "seed": args.seed,
                   "passed": passed, "failed": failed, "expected_differences": expected,
                   "tolerances": TOLERANCES, "cases": rows}
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, default=float)
    if args.keep:
        print(f"work folder kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
