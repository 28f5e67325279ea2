#!/usr/bin/env python3
"""Checks `weft replay --plugin libweft_torch_plugin.so gelu_mlp-symbol.json` against references
computed without weft and without libtorch.

The graph is data -> FullyConnected(64) -> torch_gelu (the plugin's libtorch operator) ->
FullyConnected(10). This script
  1. draws the input and the weights (seeded) and writes them as data.npy and an MXNet .params
     file ("arg:" names);
  2. runs the inference replay (--params, --input data=data.npy, --save-outputs) and a training
     replay (--train --save-grads: one backward pass with head gradient ones, which runs the
     plugin's torch_gelu_backward);
  3. compares the output and every weight gradient per element with
     - a NumPy float64 reference (GELU(z) = z * Phi(z) through math.erf, and its derivative
       Phi(z) + z * phi(z) written out), always;
     - real MXNet 1.9.1 in float32 (LeakyReLU act_type='gelu', autograd), when mxnet imports.

Tolerance, per element: |weft - ref| <= RTOL * (|ref| + mag), where mag is the same computation
over absolute values (the size of the terms that a float32 sum rounds, carried through GELU by
its derivative; it keeps elements that cancel to near zero from needing a looser bound
everywhere).

Exit status 0 when every element is within tolerance, 1 otherwise; prints the max errors and
the replay's median latency.
"""
import argparse
import math
import os
import re
import struct
import subprocess
import sys

import numpy as np

RTOL = 1e-6  # about 17 float32 ulps of the magnitude
FILE_MAGIC = 0x112
MAGIC_V2 = 0xF993FAC9
MAGIC_V3 = 0xF993FACA
IN_DIM, HIDDEN, OUT_DIM = 32, 64, 10


def save_params(path, items):
    """Writes (name, float32 array) pairs as an MXNet V2 dense .params file (FORMATS.md)."""
    out = [struct.pack("<QQQ", FILE_MAGIC, 0, len(items))]
    for _, a in items:
        a = np.ascontiguousarray(a, dtype="<f4")
        out.append(struct.pack("<Iii", MAGIC_V2, 0, a.ndim))
        out.append(struct.pack(f"<{a.ndim}q", *a.shape))
        out.append(struct.pack("<iii", 1, 0, 0))  # cpu(0), float32
        out.append(a.tobytes())
    out.append(struct.pack("<Q", len(items)))
    for name, _ in items:
        b = name.encode()
        out.append(struct.pack("<Q", len(b)) + b)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def load_params(path):
    """Reads the dense float32 V2/V3 records weft writes; returns {name: array}."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return vals

    magic, _, count = take("<QQQ")
    if magic != FILE_MAGIC:
        raise ValueError(f"{path}: not an MXNet .params file")
    arrays = []
    for k in range(count):
        rec, stype, ndim = take("<Iii")
        if rec not in (MAGIC_V2, MAGIC_V3) or stype != 0 or ndim < 1:
            raise ValueError(f"{path}: array {k}: not a dense V2/V3 record with a shape")
        shape = take(f"<{ndim}q")
        _, _, flag = take("<iii")
        if flag != 0:
            raise ValueError(f"{path}: array {k}: type flag {flag}, expected float32 (0)")
        n = int(np.prod(shape))
        arrays.append(np.frombuffer(data, "<f4", n, pos).reshape(shape).copy())
        pos += 4 * n
    (n_names,) = take("<Q")
    names = []
    for _ in range(n_names):
        (ln,) = take("<Q")
        names.append(data[pos:pos + ln].decode())
        pos += ln
    return dict(zip(names, arrays))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def numpy_reference(x, w):
    """Output and weight gradients (head gradient ones) in float64, and their magnitudes: the
    same computation over absolute values, with the pre-activation's magnitude carried through
    GELU by its derivative (first-order error propagation). Returns (y, grads, mag_y, mag_grads).
    """
    a = np.abs
    x, w1, b1, w2, b2 = (v.astype(np.float64) for v in
                         (x, w["fc1_weight"], w["fc1_bias"], w["fc2_weight"], w["fc2_bias"]))
    z1 = x @ w1.T + b1
    cdf = 0.5 * (1.0 + _erf(z1 / math.sqrt(2.0)))   # Phi(z)
    pdf = np.exp(-0.5 * z1 * z1) / math.sqrt(2.0 * math.pi)  # phi(z)
    h = z1 * cdf                                     # GELU(z)
    dgelu = cdf + z1 * pdf                           # GELU'(z)
    y = h @ w2.T + b2
    g = np.ones_like(y)
    dh = g @ w2
    dz1 = dh * dgelu
    grads = {"fc2_weight": g.T @ h, "fc2_bias": g.sum(axis=0), "fc1_weight": dz1.T @ x,
             "fc1_bias": dz1.sum(axis=0)}
    # Magnitudes. |GELU''| <= 2 phi(0) < 1 bounds how far an error in z moves GELU'(z).
    mz1 = a(x) @ a(w1).T + a(b1)
    mh = a(h) + a(dgelu) * mz1
    mdh = a(g) @ a(w2)
    mdz1 = mdh * (a(dgelu) + mz1)
    mag_y = mh @ a(w2).T + a(b2)
    mag = {"fc2_weight": a(g).T @ mh, "fc2_bias": a(g).sum(axis=0), "fc1_weight": mdz1.T @ a(x),
           "fc1_bias": mdz1.sum(axis=0)}
    return y, grads, mag_y, mag


def mxnet_reference(x, w):
    """Output and weight gradients from MXNet in float32 (LeakyReLU act_type='gelu')."""
    import mxnet as mx
    nd = {k: mx.nd.array(v, dtype="float32") for k, v in w.items()}
    for v in nd.values():
        v.attach_grad()
    data = mx.nd.array(x, dtype="float32")
    with mx.autograd.record():
        z1 = mx.nd.FullyConnected(data, nd["fc1_weight"], nd["fc1_bias"], num_hidden=HIDDEN)
        h = mx.nd.LeakyReLU(z1, act_type="gelu")
        y = mx.nd.FullyConnected(h, nd["fc2_weight"], nd["fc2_bias"], num_hidden=OUT_DIM)
    y.backward(mx.nd.ones_like(y))
    return y.asnumpy(), {k: v.grad.asnumpy() for k, v in nd.items()}, mx.__version__


def compare(what, got, ref, mag):
    """Per-element check; returns (ok, message)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return False, f"{what}: shape {got.shape}, reference {ref.shape}"
    err = np.abs(got - ref)
    tol = RTOL * (np.abs(ref) + mag)
    bad = err > tol
    worst = np.unravel_index(np.argmax(err / np.maximum(tol, 1e-300)), err.shape)
    rel = err / np.maximum(np.abs(ref), 1e-30)
    msg = (f"{what}: max abs err {err.max():.3e}, max rel err {rel.max():.3e}, worst element "
           f"{worst} weft {got[worst]:.9g} ref {ref[worst]:.9g} (tol {tol[worst]:.3e})")
    if bad.any():
        msg += f"; {int(bad.sum())} of {bad.size} elements out of tolerance"
    return not bad.any(), msg


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.stdout.write(p.stdout)
        raise SystemExit(f"command failed with exit status {p.returncode}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weft", required=True, help="the weft program")
    ap.add_argument("--plugin", required=True, help="libweft_torch_plugin.so")
    ap.add_argument("--graph", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "gelu_mlp-symbol.json"))
    ap.add_argument("--work", required=True, help="a folder for the files exchanged")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-mxnet", action="store_true", help="skip the MXNet reference")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    # Inputs and weights: pre-activations spread over about [-4, 4], GELU's curved part.
    rng = np.random.default_rng(args.seed)
    x = rng.uniform(-1, 1, (args.batch, IN_DIM)).astype(np.float32)
    w = {
        "fc1_weight": rng.normal(0, 2.0 / math.sqrt(IN_DIM), (HIDDEN, IN_DIM)).astype(np.float32),
        "fc1_bias": rng.uniform(-0.5, 0.5, HIDDEN).astype(np.float32),
        "fc2_weight": rng.normal(0, 1.0 / math.sqrt(HIDDEN), (OUT_DIM, HIDDEN)).astype(np.float32),
        "fc2_bias": rng.uniform(-0.1, 0.1, OUT_DIM).astype(np.float32),
    }
    data_path = os.path.join(args.work, "data.npy")
    params_path = os.path.join(args.work, "weights.params")
    np.save(data_path, x)
    save_params(params_path, [("arg:" + k, v) for k, v in w.items()])

    base = [args.weft, "replay", "--plugin", args.plugin, args.graph, "--params", params_path,
            "--input", "data=" + data_path, "--quiet"]
    out_dir = os.path.join(args.work, "outputs")
    log = run(base + ["--warmup", "5", "--iters", str(args.iters), "--save-outputs", out_dir])
    m = re.search(r"replay median_ms=([0-9.]+) p90_ms=([0-9.]+)", log)
    median = m.group(1) if m else "?"
    grads_path = os.path.join(args.work, "grads.params")
    run(base + ["--train", "--warmup", "0", "--iters", "1", "--save-grads", grads_path])
    y = np.load(os.path.join(out_dir, "0.npy"))
    grads = {k.split(":", 1)[1]: v for k, v in load_params(grads_path).items()}

    ref_y, ref_g, mag_y, mag_g = numpy_reference(x, w)
    sections = [(f"reference NumPy float64 (GELU through math.erf), batch {args.batch}:",
                 [("output", y, ref_y, mag_y)] +
                 [(f"grad {k}", grads.get(k, np.zeros(0)), ref_g[k], mag_g[k])
                  for k in sorted(ref_g)])]
    if not args.no_mxnet:
        try:
            mx_y, mx_g, version = mxnet_reference(x, w)
        except ImportError:
            print("reference MXNet: not run (mxnet does not import)")
        else:
            # Two float32 results, each within the bound of the exact value: twice the bound apart.
            sections.append((f"reference MXNet {version} float32 (LeakyReLU act_type='gelu', "
                             "autograd):",
                             [("output", y, mx_y, 2 * mag_y)] +
                             [(f"grad {k}", grads.get(k, np.zeros(0)), mx_g[k], 2 * mag_g[k])
                              for k in sorted(mx_g)]))
    ok = True
    for title, cases in sections:
        print(title)
        for what, got, ref, mag in cases:
            good, msg = compare(what, got, ref, mag)
            print(("  ok   " if good else "  FAIL ") + msg)
            ok = ok and good
    print(f"torch_plugin: replay median_ms={median} (batch {args.batch}); "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
