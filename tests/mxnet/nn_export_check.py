#!/usr/bin/env python3
"""weft.nn's export read by real MXNet 1.9.1: models built with weft.nn, exported with
``model.export`` (``-symbol.json`` and ``-0000.params``), loaded with ``mx.sym.load`` and
``mx.nd.load`` and run by MXNet's executor; the outputs compared element by element with weft's.

Two Pythons take part, each in its own process (weft and MXNet are never imported together):

  * weft's (a venv where ``import weft`` works: build/pyenv after scripts/test.sh, or any Python
    with WEFT_NATIVE_DIR and PYTHONPATH pointing at a development build) runs the export stage:
    per model it builds the model, draws its parameters with a fixed seed (BatchNorm's gamma,
    beta and moving statistics moved off their initial values so that a lost one shows), runs a
    fixed input imperatively in inference mode and writes into OUT
    ``<model>-symbol.json``, ``<model>-0000.params``, ``<model>-input.npy``,
    ``<model>-output<k>.npy`` and ``manifest.json``;
  * MXNet's (tests/mxnet/setup_venv.sh's venv) runs the MXNet stage: ``mx.sym.load``,
    ``mx.nd.load`` (``arg:``/``aux:`` split, which must match the symbol's arguments and
    auxiliary states exactly), ``sym.bind`` (grad_req null), ``forward(is_train=False)``, and per
    element ``|weft - mx| <= ATOL + RTOL*|mx|``. One line per model; exit status 1 on any
    mismatch or failure.

The driver (this script without --stage) runs both stages in subprocesses; it needs only the
standard library, so any Python 3 can start it:

    python3 tests/mxnet/nn_export_check.py --weft-python build/pyenv/bin/python \\
        --mxnet-python build/mxnet-venv/bin/python --out build/mxnet-check/nn-export

--weft-python defaults to $WEFT_PYTHON, else <repo>/build/pyenv/bin/python; --mxnet-python to
$WEFT_MXNET_PYTHON, else $WEFT_MXNET_VENV/bin/python, else <repo>/build/mxnet-venv/bin/python.
The environment is passed on unchanged (WEFT_NATIVE_DIR and PYTHONPATH included).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

RTOL = 1e-4
ATOL = 1e-5
SEED = 20240613


# ---- export stage (weft's Python) ---------------------------------------------------------------
def _models():
    """name -> (builder, input shape). Builders import weft.nn lazily (the MXNet stage and the
    driver never import weft)."""
    import weft.nn as nn

    def cnn():
        return nn.Sequential(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.ReLU(),
                             nn.MaxPool2D(2), nn.Conv2D(8, 3, strides=2, padding=1),
                             nn.BatchNorm(), nn.ReLU(), nn.Flatten(), nn.Dropout(0.3),
                             nn.Dense(16, activation="relu"), nn.Dropout(0.2), nn.Dense(10))

    def lstm():
        return nn.Sequential(nn.LSTM(8, num_layers=2, bidirectional=True, layout="NTC"),
                             nn.Dense(5))

    def gru():
        return nn.Sequential(nn.GRU(6, layout="TNC"), nn.Dense(3, flatten=False))

    return {
        "cnn-bn-dropout": (cnn, (2, 3, 16, 16)),
        "lstm-2layer-bidirectional": (lstm, (2, 7, 5)),
        "gru": (gru, (6, 2, 4)),
        "resnet18-classes10": (lambda: nn.models.resnet18(classes=10), (2, 3, 64, 64)),
        "mobilenetv2-classes10": (lambda: nn.models.mobilenet_v2(classes=10), (2, 3, 64, 64)),
    }


def _perturb_batchnorm(params, rng):
    import numpy as np
    for name, value in params.items():
        if name.endswith("_gamma") or name.endswith("_moving_var"):
            value[:] = rng.uniform(0.5, 1.5, value.shape).astype(np.float32)
        elif name.endswith("_beta") or name.endswith("_moving_mean"):
            value[:] = rng.uniform(-0.2, 0.2, value.shape).astype(np.float32)


def export_stage(out, only=None):
    """Builds, runs and exports every model into ``out``; writes manifest.json. Returns the
    number of models that failed to export."""
    import numpy as np
    import weft

    os.makedirs(out, exist_ok=True)
    manifest, failures = [], 0
    for i, (name, (build, shape)) in enumerate(_models().items()):
        if only and name not in only:
            continue
        try:
            rng = np.random.default_rng(SEED + i)
            model = build()
            params = model.init((None,) + shape[1:], seed=SEED + i)
            _perturb_batchnorm(params, rng)
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            ys = model.apply(params, weft.array(x))
            ys = list(ys) if isinstance(ys, tuple) else [ys]
            prefix = os.path.join(out, name)
            model.export(prefix, params)
            np.save(f"{prefix}-input.npy", x)
            for k, y in enumerate(ys):
                np.save(f"{prefix}-output{k}.npy", y.asnumpy())
            manifest.append({"name": name, "prefix": prefix, "outputs": len(ys),
                             "arg": sorted(params.trainable()),
                             "aux": sorted(params.auxiliary())})
            print(f"weft: exported {name}: input {shape}, "
                  f"{len(params.trainable())} arguments, {len(params.auxiliary())} auxiliary "
                  f"states, output {[tuple(y.shape) for y in ys]}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported per model, the others still run
            failures += 1
            manifest.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            print(f"weft: {name}: export FAILED: {type(e).__name__}: {e}", flush=True)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return failures


# ---- MXNet stage (MXNet's Python) ---------------------------------------------------------------
def _mxnet_one(mx, np, entry):
    prefix = entry["prefix"]
    sym = mx.sym.load(f"{prefix}-symbol.json")
    loaded = mx.nd.load(f"{prefix}-0000.params")
    arg = {k[4:]: v for k, v in loaded.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in loaded.items() if k.startswith("aux:")}
    other = [k for k in loaded if not k.startswith(("arg:", "aux:"))]
    problems = []
    if other:
        problems.append(f"keys without arg:/aux: {other}")
    want_args = sorted(n for n in sym.list_arguments() if n != "data")
    if sorted(arg) != want_args:
        problems.append(f"arg: names {sorted(arg)} != the symbol's arguments {want_args}")
    if sorted(aux) != sorted(sym.list_auxiliary_states()):
        problems.append(f"aux: names {sorted(aux)} != the symbol's auxiliary states "
                        f"{sorted(sym.list_auxiliary_states())}")
    if sorted(arg) != entry["arg"] or sorted(aux) != entry["aux"]:
        problems.append("the file's names differ from weft's parameters")
    if problems:
        return False, "; ".join(problems)
    x = np.load(f"{prefix}-input.npy")
    args = dict(arg, data=mx.nd.array(x, dtype=x.dtype))
    ex = sym.bind(mx.cpu(), args=args, aux_states=aux, grad_req="null")
    outs = [o.asnumpy() for o in ex.forward(is_train=False)]
    if len(outs) != entry["outputs"]:
        return False, f"{len(outs)} outputs, weft has {entry['outputs']}"
    ok, parts = True, []
    for k, m in enumerate(outs):
        w = np.load(f"{prefix}-output{k}.npy")
        if w.shape != m.shape:
            ok = False
            parts.append(f"output {k}: shape {w.shape} != MXNet's {m.shape}")
            continue
        m64, w64 = m.astype(np.float64), w.astype(np.float64)
        err = np.abs(w64 - m64)
        bad = err > ATOL + RTOL * np.abs(m64)
        rel = float((err / np.maximum(np.abs(m64), 1e-30))[np.abs(m64) > ATOL].max(initial=0.0))
        parts.append(f"output {k} {m.shape}: max|mx| {np.abs(m64).max():.3g}, "
                     f"max abs err {err.max():.3g}, max rel err {rel:.3g}, "
                     f"{int(bad.sum())} of {bad.size} elements outside tolerance")
        if bad.any():
            ok = False
            i = np.unravel_index(int(np.argmax(err - RTOL * np.abs(m64))), m.shape)
            parts.append(f"worst at {tuple(int(d) for d in i)}: weft {w64[i]:.7g}, "
                         f"mx {m64[i]:.7g}")
    return ok, "; ".join(parts)


def mxnet_stage(out):
    """Loads every exported model with MXNet and compares. Returns the number of failures."""
    os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
    import mxnet as mx
    import numpy as np

    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    failures = 0
    print(f"MXNet {mx.__version__}: per element |weft - mx| <= {ATOL:g} + {RTOL:g}*|mx|",
          flush=True)
    for entry in manifest:
        name = entry["name"]
        if "error" in entry:
            failures += 1
            print(f"FAIL {name}: not exported by weft: {entry['error']}", flush=True)
            continue
        try:
            ok, detail = _mxnet_one(mx, np, entry)
        except Exception as e:  # noqa: BLE001 - reported per model
            ok, detail = False, f"MXNet could not load or run it: {type(e).__name__}: {e}"
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    return failures


# ---- driver --------------------------------------------------------------------------------------
def _default_mxnet_python():
    if os.environ.get("WEFT_MXNET_PYTHON"):
        return os.environ["WEFT_MXNET_PYTHON"]
    venv = os.environ.get("WEFT_MXNET_VENV") or os.path.join(ROOT, "build", "mxnet-venv")
    return os.path.join(venv, "bin", "python")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft-python", default=os.environ.get("WEFT_PYTHON") or
                    os.path.join(ROOT, "build", "pyenv", "bin", "python"),
                    help="a Python that imports weft (default: $WEFT_PYTHON, else "
                         "build/pyenv/bin/python)")
    ap.add_argument("--mxnet-python", default=_default_mxnet_python(),
                    help="the MXNet 1.9.1 venv's Python (default: $WEFT_MXNET_PYTHON, else "
                         "$WEFT_MXNET_VENV/bin/python, else build/mxnet-venv/bin/python)")
    ap.add_argument("--out", help="work directory (default: a temporary one, removed after)")
    ap.add_argument("--models", nargs="*", help="only these models (default: all)")
    ap.add_argument("--stage", choices=("export", "mxnet"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.stage == "export":
        return 1 if export_stage(args.out, args.models) else 0
    if args.stage == "mxnet":
        return 1 if mxnet_stage(args.out) else 0

    for what, py in (("weft", args.weft_python), ("MXNet", args.mxnet_python)):
        if not os.access(py, os.X_OK):
            print(f"nn_export_check: no {what} Python at {py}", file=sys.stderr)
            return 2
    tmp = None
    out = args.out
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="weft-nn-export-")
        out = tmp.name
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    me = os.path.abspath(__file__)
    only = ["--models", *args.models] if args.models else []
    try:
        # From outside the repository: `import weft` is the installed package or PYTHONPATH's.
        rc_export = subprocess.call([args.weft_python, me, "--stage", "export", "--out", out,
                                     *only], cwd="/")
        if not os.path.exists(os.path.join(out, "manifest.json")):
            print("nn_export_check: the export stage wrote no manifest (exit "
                  f"{rc_export}); nothing to compare", file=sys.stderr)
            return 1
        rc_mx = subprocess.call([args.mxnet_python, me, "--stage", "mxnet", "--out", out],
                                cwd="/")
    finally:
        if tmp is not None:
            tmp.cleanup()
    status = 0 if rc_export == 0 and rc_mx == 0 else 1
    print(f"nn_export_check: {'PASS' if status == 0 else 'FAIL'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
