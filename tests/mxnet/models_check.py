#!/usr/bin/env python3
"""Every MXNet model of ../shared/models at batch 1, run by real MXNet 1.9.1 and by `weft replay`
with the same weights and inputs; all heads compared element by element.

Run with the Python of the venv made by tests/mxnet/setup_venv.sh:

    build/mxnet-venv/bin/python tests/mxnet/models_check.py --weft build/tools/weft --out DIR

Per model (see docs/MXNET.md, "Models", for the reasoning):
  1. Inputs at batch 1 (the shapes of tests/graph/model_inputs.h): data uniform in [-1, 1)
     ([0, 255) for MobileFaceNet, whose graph subtracts 127.5 and scales by 1/128); token ids and
     class labels uniform over their range; CTC labels uniform over 1..C-1 (blank is class 0).
  2. Weights drawn with MXNet's own initialisers, seeded per model: convolution, fully-connected
     and embedding weights MSRA (mx.init.Xavier gaussian, fan-in, magnitude 2); biases and BatchNorm
     beta uniform in [-0.1, 0.1); BatchNorm gamma uniform in [0.5, 1.5); PReLU slopes uniform in
     [0.05, 0.3).
  3. BatchNorm moving statistics calibrated from one forward pass: MXNet runs the graph in
     training mode (every BatchNorm normalising with its batch statistics; use_global_stats off
     and Dropout p = 0 for this pass) on a calibration batch of 4 samples (the test input and 3
     more from the same distribution), and each BN's moving_mean/moving_var become the
     per-channel mean/(biased) variance of its input in that pass. So every BN output is about
     unit scale, as in a trained model.
  4. Softmax heads kept away from saturation: where the logits of a softmax have a standard
     deviation above 3 along its axis, the convolution/fully-connected layer producing them
     (through ReLU/pooling/reshape only) is scaled to make it 2 (only SqueezeNet needs it).
     A head whose MXNet output is constant or a saturated 0/1 tensor fails the check: it would
     compare nothing.
  5. The weights are saved with mx.nd.save ("arg:"/"aux:" names), the inputs (labels included)
     as .npy; MXNet's executor runs the full graph (grad_req null, is_train False, its default
     MKL-DNN subgraph fusion on); `weft replay GRAPH --params P --input NAME=FILE.npy ...
     --save-outputs DIR` runs the same; DIR/k.npy is head k.
  6. Per element: |weft - mx| <= atol + rtol * |mx| with rtol = 1e-3 and atol = ATOL_SCALE *
     max|mx head| (defaults below). Max abs and max relative error are reported per head.
     --fp64 also runs MXNet in float64 (where all of a model's operators support it) and reports
     how far MXNet's own float32 result and weft's are from it.

The three TVM graph-executor files (*deploy*graph.json) are not MXNet symbols (weft only inspects
them, `weft info`); they are listed as not applicable.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np

os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
import mxnet as mx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODELS_DIR = os.path.join(os.path.dirname(ROOT), "shared", "models")

RTOL = 1e-3
ATOL_SCALE = 1e-4  # atol = ATOL_SCALE * max|mx head|
CALIB_BATCH = 4


def U(lo, hi):
    return ("uniform", lo, hi)


# Inputs per model at batch 1; the same shapes as tests/graph/model_inputs.h (keep in step).
# Labels of SoftmaxOutput heads are not listed: their shapes and class counts are read off the
# graph. "#" in a name stands for the steps 0..steps-1 of an unrolled recurrence.
MODELS = [
    ("apache__mxnet__save_000800.json", "mlp-000800", {"data": ((1, 784), U(-1, 1))}),
    ("deepinsight__insightface__det1-symbol.json", "mtcnn-pnet", {"data": ((1, 3, 12, 12), U(-1, 1))}),
    ("pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json", "resnet50-v2",
     {"data": ((1, 3, 224, 224), U(-1, 1))}),
    ("lucasjinreal__Char-Generator-LSTM__obama-symbol.json", "char-lstm",
     dict([("data/#", ((1,), ("ids", 84)))] +
          [("l%d_init_%s" % (l, k), ((1, 512), U(-1, 1))) for l in range(3) for k in "hc"]), 129),
    ("miaow1988__SqueezeNet_v1.2__model-symbol.json", "squeezenet-1.2", {"data": ((1, 3, 224, 224), U(-1, 1))}),
    ("KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json", "mobilenet-v2", {"data": ((1, 3, 224, 224), U(-1, 1))}),
    ("soeaver__mxnet-model__inception_v3-symbol.json", "inception-v3", {"data": ((1, 3, 299, 299), U(-1, 1))}),
    ("soeaver__mxnet-model__se-resnext50-32x4d-symbol.json", "se-resnext50",
     {"data": ((1, 3, 224, 224), U(-1, 1))}),
    ("apache__mxnet__test_mkldnn_test_mkldnn_model_model1.json", "vgg16-reduced",
     {"data": ((1, 3, 224, 224), U(-1, 1))}),
    ("bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json", "retinaface-mnet25",
     {"data": ((1, 3, 640, 640), U(-1, 1))}),
    ("Mengman__TensorRT_Tutorial__ocr-symbol.json", "crnn-ocr",
     dict([("data", ((1, 1, 80, 32), U(-1, 1))), ("label", ((1, 4), ("ctc", 27)))] +
          [("l%d_init_%s" % (l, k), ((1, 100), U(-1, 1))) for l in range(4) for k in "hc"])),
    ("fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json", "resnet18-v1",
     {"data": ((1, 3, 224, 224), U(-1, 1))}),
    ("kylehoffpauir__AdvOSBig__net-symbol.json", "gluon-mlp", {"data": ((1, 784), U(-1, 1))}),
    ("MirrorYuChen__tvm_insightface__model-symbol.json", "mobilefacenet",
     {"data": ((1, 3, 112, 112), U(0, 255))}),
]

TVM_FILES = [
    "MirrorYuChen__tvm_insightface__deploy_graph.json",
    "YiChunHung__MobileNet_pretrain__mobilenet_deploy_graph.json",
    "YiChunHung__MobileNet_pretrain__deploy_squ_graph.json",
]


def expand_inputs(spec):
    """(name -> (shape, generator)) with "#" names expanded over the steps."""
    inputs = spec[2]
    steps = spec[3] if len(spec) > 3 else 0
    out = {}
    for name, value in inputs.items():
        if name.endswith("#"):
            for t in range(steps):
                out[name[:-1] + str(t)] = value
        else:
            out[name] = value
    return out


def draw(rng, shape, gen):
    kind = gen[0]
    if kind == "uniform":
        return rng.uniform(gen[1], gen[2], size=shape).astype(np.float32)
    if kind == "ids":  # class or token ids 0..n-1, as float32 (MXNet's label and index type)
        return rng.randint(0, gen[1], size=shape).astype(np.float32)
    if kind == "ctc":  # CTC label sequences over 1..n-1 (blank_label "first": 0 is the blank)
        return rng.randint(1, gen[1], size=shape).astype(np.float32)
    raise ValueError("unknown input generator %r" % (gen,))


def graph_of(sym):
    return json.loads(sym.tojson())


def variable_roles(g):
    """variable name -> (consuming op, input slot, consuming node) of its first consumer."""
    roles = {}
    for node in g["nodes"]:
        if node["op"] == "null":
            continue
        for slot, entry in enumerate(node["inputs"]):
            src = g["nodes"][entry[0]]
            if src["op"] == "null":
                roles.setdefault(src["name"], (node["op"], slot, node))
    return roles


def label_inputs(g):
    """Names of the label variables of SoftmaxOutput heads (slot 1)."""
    return {g["nodes"][n["inputs"][1][0]]["name"] for n in g["nodes"]
            if n["op"] == "SoftmaxOutput" and len(n["inputs"]) > 1}


def init_weight(name, role, shape):
    """A weight drawn with MXNet's initialisers (seeded by mx.random.seed) for its role."""
    op, slot, _ = role
    arr = mx.nd.zeros(shape)
    if op in ("Convolution", "Deconvolution", "FullyConnected", "Embedding") and slot == 1:
        mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)._init_weight(name, arr)
    elif op in ("Convolution", "Deconvolution", "FullyConnected") and slot == 2:
        mx.init.Uniform(0.1)._init_weight(name, arr)
    elif op == "BatchNorm" and slot == 1:
        arr[:] = mx.nd.random.uniform(0.5, 1.5, shape=shape)
    elif op == "BatchNorm" and slot == 2:
        mx.init.Uniform(0.1)._init_weight(name, arr)
    elif op == "LeakyReLU" and slot == 1:
        arr[:] = mx.nd.random.uniform(0.05, 0.3, shape=shape)
    else:
        raise ValueError("no initialiser for variable %s (input %d of %s)" % (name, slot, op))
    return arr


class NoSubgraphBackend:
    """MXNet binds without its MKL-DNN subgraph pass inside this context (MXNet reads
    MXNET_SUBGRAPH_BACKEND at each bind)."""

    def __enter__(self):
        self.saved = os.environ.get("MXNET_SUBGRAPH_BACKEND")
        os.environ["MXNET_SUBGRAPH_BACKEND"] = "NONE"

    def __exit__(self, *exc):
        if self.saved is None:
            del os.environ["MXNET_SUBGRAPH_BACKEND"]
        else:
            os.environ["MXNET_SUBGRAPH_BACKEND"] = self.saved


def cut_symbol(g, entries):
    """The symbol whose outputs are the graph entries [node, output] of `g` (JSON graph)."""
    cut = dict(g, heads=[[e[0], e[1], 0] for e in entries])
    return mx.sym.load_json(json.dumps(cut))


def calibrate_batchnorm(g, args, aux, calib_inputs):
    """Sets each BatchNorm's moving_mean/moving_var to the per-channel mean and (biased) variance
    of its input in one training-mode forward of the calibration batch, where every BatchNorm
    normalises with its batch statistics (use_global_stats is switched off for this pass). With
    those statistics the inference-mode BNs reproduce that pass. Returns the number of BNs."""
    nodes = g["nodes"]
    bns = [i for i, n in enumerate(nodes) if n["op"] == "BatchNorm"]
    if not bns:
        return 0
    g = json.loads(json.dumps(g))
    for n in g["nodes"]:
        if n["op"] == "BatchNorm":
            n.setdefault("attrs", {})["use_global_stats"] = "False"
        elif n["op"] == "Dropout":  # training mode must not drop
            n.setdefault("attrs", {})["p"] = "0"
    outs = [tuple(nodes[b]["inputs"][0][:2]) for b in bns]
    uniq = sorted(set(outs))
    cut = cut_symbol(g, uniq)
    cut_args = {k: (calib_inputs[k] if k in calib_inputs else args[k]) for k in cut.list_arguments()}
    cut_aux = {k: aux[k].copy() for k in cut.list_auxiliary_states()}
    # Without the MKL-DNN subgraph pass: on this cut graph it miscounts the inputs and bind fails.
    with NoSubgraphBackend():
        exe = cut.bind(mx.cpu(), args=cut_args, aux_states=cut_aux, grad_req="null")
        values = dict(zip(uniq, (o.asnumpy().astype(np.float64) for o in exe.forward(is_train=True))))
    for b, o in zip(bns, outs):
        x = values[o]
        axis = int(nodes[b].get("attrs", {}).get("axis", "1")) % x.ndim
        red = tuple(d for d in range(x.ndim) if d != axis)
        aux[nodes[nodes[b]["inputs"][3][0]]["name"]] = mx.nd.array(x.mean(axis=red), dtype=np.float32)
        aux[nodes[nodes[b]["inputs"][4][0]]["name"]] = mx.nd.array(x.var(axis=red), dtype=np.float32)
    return len(bns)


SOFTMAX_OPS = ("SoftmaxOutput", "softmax", "log_softmax", "SoftmaxActivation")
# Ops through which scaling the producing layer's weight and bias by s > 0 scales the logits by s.
HOMOGENEOUS_OPS = ("Flatten", "Reshape", "Pooling", "Dropout", "Activation", "LeakyReLU", "Crop")
LOGIT_STD_MAX, LOGIT_STD_TARGET = 3.0, 2.0


def temper_logits(g, args, aux, inputs):
    """Keeps every softmax away from saturation: where the logits of a softmax have a standard
    deviation (along its axis) above LOGIT_STD_MAX, the convolution or fully-connected layer that
    produces them (reached through homogeneous ops only) gets its weight and bias scaled so that
    the standard deviation is LOGIT_STD_TARGET. Returns {layer: scale}."""
    nodes = g["nodes"]
    plans = []
    for n in nodes:
        if n["op"] not in SOFTMAX_OPS:
            continue
        attrs = n.get("attrs", {})
        axis = int(attrs.get("axis", "-1")) if n["op"] in ("softmax", "log_softmax") else 1
        entry, ok = n["inputs"][0], True
        while nodes[entry[0]]["op"] not in ("Convolution", "FullyConnected"):
            src = nodes[entry[0]]
            act = src.get("attrs", {}).get("act_type", "relu")
            if src["op"] not in HOMOGENEOUS_OPS or act not in ("relu", "leaky", "prelu"):
                ok = False
                break
            entry = src["inputs"][0]
        if ok:
            plans.append((n["inputs"][0], axis, nodes[entry[0]]))
    if not plans:
        return {}
    cut = cut_symbol(g, [e for e, _, _ in plans])
    feed = dict(args, **{k: mx.nd.array(v) for k, v in inputs.items()})
    exe = cut.bind(mx.cpu(), args={k: feed[k] for k in cut.list_arguments()},
                   aux_states={k: aux[k] for k in cut.list_auxiliary_states()}, grad_req="null")
    scales = {}
    for (_, axis, layer), logits in zip(plans, exe.forward(is_train=False)):
        std = float(np.mean(np.std(logits.asnumpy().astype(np.float64), axis=axis)))
        if std <= LOGIT_STD_MAX or layer["name"] in scales:
            continue
        scale = LOGIT_STD_TARGET / std
        for slot in (1, 2):
            if slot < len(layer["inputs"]):
                var = nodes[layer["inputs"][slot][0]]["name"]
                args[var] = args[var] * scale
        scales[layer["name"]] = scale
    return scales


def make_case(spec, models_dir, seed):
    """Inputs, weights and MXNet's outputs for one model."""
    file, name = spec[0], spec[1]
    sym = mx.sym.load(os.path.join(models_dir, file))
    g = graph_of(sym)
    model_seed = (seed * 1000003 + zlib.crc32(name.encode())) % (2 ** 31)
    rng = np.random.RandomState(model_seed)
    mx.random.seed(model_seed)
    specs = expand_inputs(spec)
    arg_names = sym.list_arguments()
    for n in specs:
        if n not in arg_names:
            raise ValueError("%s: the graph has no input %s" % (file, n))
    # Shapes of everything from the data inputs; labels of SoftmaxOutput heads are inferred.
    known = {n: s for n, (s, _) in specs.items()}
    arg_shapes, _, aux_shapes = sym.infer_shape_partial(**known)
    arg_shape = dict(zip(arg_names, arg_shapes))
    labels = label_inputs(g)
    roles = variable_roles(g)
    # SoftmaxOutput labels: class ids over the classes of the prediction (axis 1).
    todo = sorted(labels - set(specs))
    if todo:
        preds = cut_symbol(g, [roles[n][2]["inputs"][0] for n in todo])
        _, pred_shapes, _ = preds.infer_shape_partial(**{k: v for k, v in known.items()
                                                         if k in preds.list_arguments()})
        for n, pred in zip(todo, pred_shapes):  # SoftmaxOutput: classes on axis 1
            specs[n] = (tuple(arg_shape[n]), ("ids", int(pred[1])))
    inputs = {n: draw(rng, s, gen) for n, (s, gen) in specs.items()}
    args = {}
    for n in arg_names:
        if n in inputs:
            continue
        if n not in roles:
            raise ValueError("%s: variable %s has no consumer" % (file, n))
        args[n] = init_weight(n, roles[n], tuple(arg_shape[n]))
    aux = {n: mx.nd.array(np.zeros(s) if "mean" in n else np.ones(s), dtype=np.float32)
           for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    # Calibration batch: the test input and CALIB_BATCH - 1 more draws.
    calib = {}
    for n, (s, gen) in specs.items():
        more = draw(rng, (CALIB_BATCH - 1,) + tuple(s[1:]), gen)
        calib[n] = mx.nd.array(np.concatenate([inputs[n], more]), dtype=np.float32)
    bns = calibrate_batchnorm(g, args, aux, calib)
    tempered = temper_logits(g, args, aux, inputs)
    exe = sym.bind(mx.cpu(), args=dict(args, **{n: mx.nd.array(v) for n, v in inputs.items()}),
                   aux_states=aux, grad_req="null")
    outs = [o.asnumpy() for o in exe.forward(is_train=False)]
    ctc_labels = {n for n, (_, gen) in specs.items() if gen[0] == "ctc"}
    return {"sym": sym, "inputs": inputs, "args": args, "aux": aux, "outputs": outs,
            "output_names": sym.list_outputs(), "labels": sorted(labels | ctc_labels),
            "batchnorms": bns, "tempered": tempered}


def forward_fp64(case):
    """MXNet's outputs in float64 (no subgraph fusion), or the reason it cannot run them."""
    cast = {k: v.astype("float64") for k, v in case["args"].items()}
    cast.update({k: mx.nd.array(v, dtype="float64") for k, v in case["inputs"].items()})
    aux = {k: v.astype("float64") for k, v in case["aux"].items()}
    try:
        with NoSubgraphBackend():
            exe = case["sym"].bind(mx.cpu(), args=cast, aux_states=aux, grad_req="null")
            return [o.asnumpy() for o in exe.forward(is_train=False)], None
    except mx.base.MXNetError as e:
        lines = [ln for ln in str(e).splitlines() if "Error" in ln or "Check failed" in ln]
        return None, (lines[-1] if lines else str(e).splitlines()[0])[:200]


def degenerate(ref):
    """True when a head compares (almost) nothing: more than one element and all equal, or a
    saturated probability tensor (values in [0, 1], 99% of them within 1e-6 of 0 or 1)."""
    if ref.size <= 1:
        return False
    if np.all(ref == ref.flat[0]):
        return True
    if ref.min() < 0 or ref.max() > 1:
        return False
    return bool(np.mean(np.minimum(ref, 1 - ref) < 1e-6) >= 0.99)


def compare(out, ref, rtol, atol_scale):
    """Per-element |out - ref| <= atol + rtol * |ref| (atol = atol_scale * max|ref|), with the
    error statistics of the table."""
    if ref.size == 0:
        return {"max_abs_mx": 0.0, "max_abs_err": 0.0, "max_rel_err": 0.0, "scaled_err": 0.0,
                "atol": 0.0, "tolerance_used": 0.0, "pass": True}
    ref64, out64 = ref.astype(np.float64), out.astype(np.float64)
    peak = float(np.max(np.abs(ref64)))
    atol = atol_scale * peak
    both_nan = np.isnan(ref64) & np.isnan(out64)
    diff = np.where(both_nan, 0.0, np.abs(out64 - ref64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    tol = atol + rtol * np.abs(ref64)
    ratio = np.where(tol > 0, diff / np.where(tol > 0, tol, 1.0), np.where(diff > 0, np.inf, 0.0))
    # Relative error over the elements that are not cancellation noise (|mx| >= 1e-3 peak).
    big = np.abs(ref64) >= 1e-3 * peak
    rel = float(np.max(diff[big] / np.abs(ref64[big]))) if peak > 0 else 0.0
    worst = int(np.argmax(ratio))
    return {"max_abs_mx": peak, "max_abs_err": float(np.max(diff)), "max_rel_err": rel,
            "scaled_err": float(np.max(diff)) / peak if peak > 0 else 0.0, "atol": atol,
            "tolerance_used": float(np.max(ratio)), "pass": bool(np.all(diff <= tol)),
            "worst_index": [int(i) for i in np.unravel_index(worst, ref.shape)],
            "worst_weft": float(out64.flat[worst]), "worst_mx": float(ref64.flat[worst])}


def run_weft(weft, model_path, params, input_files, out_dir, log_path, timeout, no_fuse):
    cmd = [weft, "replay", model_path, "--params", params, "--warmup", "0", "--iters", "1", "--quiet",
           "--save-outputs", out_dir] + (["--no-fuse"] if no_fuse else [])
    for n, f in input_files.items():
        cmd += ["--input", "%s=%s" % (n, f)]
    with open(log_path, "w") as log:
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
    return r.returncode, cmd


def check_model(spec, args):
    file, name = spec[0], spec[1]
    work = os.path.join(args.out, "models", name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.time()
    case = make_case(spec, args.models_dir, args.seed)
    t_mx = time.time() - t0
    params = os.path.join(work, "weights.params")
    saved = {"arg:" + k: v for k, v in case["args"].items()}
    saved.update({"aux:" + k: v for k, v in case["aux"].items()})
    mx.nd.save(params, saved)
    input_files = {}
    for n, v in case["inputs"].items():
        f = os.path.join(work, "input_" + n.replace("/", "_") + ".npy")
        np.save(f, v)
        input_files[n] = f
    for h, o in enumerate(case["outputs"]):
        np.save(os.path.join(work, "mx_%d.npy" % h), o)
    out_dir = os.path.join(work, "weft_out")
    t1 = time.time()
    rc, cmd = run_weft(args.weft, os.path.join(args.models_dir, file), params, input_files, out_dir,
                       os.path.join(work, "weft.log"), args.timeout, args.no_fuse)
    t_weft = time.time() - t1
    result = {"model": name, "file": file, "labels": case["labels"], "batchnorms": case["batchnorms"],
              "tempered": case["tempered"], "mxnet_s": round(t_mx, 2), "weft_s": round(t_weft, 2),
              "weft_rc": rc, "heads": []}
    if rc != 0:
        with open(os.path.join(work, "weft.log")) as f:
            result["error"] = "weft replay exited %d: %s" % (rc, f.read()[-2000:])
        result["pass"] = False
        return result
    for h, (ref, oname) in enumerate(zip(case["outputs"], case["output_names"])):
        path = os.path.join(out_dir, "%d.npy" % h)
        head = {"head": h, "name": oname, "shape": list(ref.shape)}
        if not os.path.exists(path):
            head.update({"pass": False, "error": "weft wrote no %s" % path})
        else:
            out = np.load(path)
            if out.shape != ref.shape:
                head.update({"pass": False, "error": "weft shape %s, MXNet %s" % (out.shape, ref.shape)})
            else:
                head.update(compare(out, ref, args.rtol, args.atol_scale))
                if degenerate(ref):
                    head.update({"pass": False, "error": "MXNet's output is degenerate (constant or 0/1)"})
        result["heads"].append(head)
    if args.fp64:
        ref64, why = forward_fp64(case)
        result["fp64"] = why or "ran"
        for hd, r64 in zip(result["heads"], ref64 or []):
            if "max_abs_err" in hd:
                out = np.load(os.path.join(out_dir, "%d.npy" % hd["head"])).astype(np.float64)
                hd["mx32_vs_fp64"] = float(np.max(np.abs(case["outputs"][hd["head"]] - r64)))
                hd["weft_vs_fp64"] = float(np.max(np.abs(out - r64)))
    result["pass"] = all(hd["pass"] for hd in result["heads"])
    if result["pass"] and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def fmt(x):
    return "%.3g" % x


def print_table(results, fp64):
    """model | head | shape | max|mx| | max abs err | abs err / max|mx| | max rel err | pass; with
    fp64 also the float32-vs-float64 errors of MXNet and weft. Many per-step heads (char-lstm) are
    summarised in one row (maxima over the heads)."""
    cols = ["model", "head", "shape", "max|mx|", "max abs err", "abs/max|mx|", "max rel err"]
    keys = ["max_abs_mx", "max_abs_err", "scaled_err", "max_rel_err"]
    if fp64:
        cols += ["mx fp32-fp64", "weft-fp64"]
        keys += ["mx32_vs_fp64", "weft_vs_fp64"]
    rows = [cols + ["result"]]
    for r in results:
        if "error" in r and not r["heads"]:
            rows.append([r["model"]] + ["-"] * (len(cols) - 1) + ["FAIL: " + r["error"].splitlines()[0][:80]])
            continue
        heads = r["heads"]
        groups = [heads] if len(heads) > 12 else [[hd] for hd in heads]
        for group in groups:
            hd = max(group, key=lambda h: h.get("max_abs_err", np.inf))
            name = hd["name"] if len(group) == 1 else "%d heads (worst: %s)" % (len(group), hd["name"])
            vals = [fmt(max(h[k] for h in group)) if all(k in h for h in group) else "-" for k in keys]
            bad = [h for h in group if not h["pass"]]
            status = "ok" if not bad else "FAIL" + ("".join(": " + h["error"] for h in bad[:1] if "error" in h))
            rows.append([r["model"], name, "x".join(map(str, hd["shape"]))] + vals + [status])
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            print("-|-".join("-" * w for w in widths))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft", required=True, help="the weft CLI (build/tools/weft)")
    p.add_argument("--out", required=True, help="work directory; the summary is OUT/models.json")
    p.add_argument("--models-dir", default=DEFAULT_MODELS_DIR)
    p.add_argument("--models", default="", help="comma-separated short names (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rtol", type=float, default=RTOL)
    p.add_argument("--atol-scale", type=float, default=ATOL_SCALE, help="atol = this * max|mx head|")
    p.add_argument("--timeout", type=float, default=300, help="seconds per weft replay")
    p.add_argument("--fp64", action="store_true", help="also compare both with MXNet in float64")
    p.add_argument("--no-fuse", action="store_true", help="run weft replay with --no-fuse")
    p.add_argument("--keep", action="store_true", help="keep weights, inputs and outputs of passing models")
    args = p.parse_args()
    args.weft = os.path.abspath(args.weft)
    os.makedirs(args.out, exist_ok=True)
    wanted = set(filter(None, args.models.split(",")))
    unknown = wanted - {m[1] for m in MODELS}
    if unknown:
        p.error("unknown models: %s" % ", ".join(sorted(unknown)))
    listed = {m[0] for m in MODELS} | set(TVM_FILES)
    stray = sorted(f for f in os.listdir(args.models_dir) if f.endswith(".json") and f not in listed)
    if stray:
        p.error("model files not in the table of %s: %s" % (__file__, ", ".join(stray)))
    print("MXNet %s, numpy %s; weft %s; rtol %g, atol %g * max|mx head|" %
          (mx.__version__, np.__version__, args.weft, args.rtol, args.atol_scale))
    results = []
    for spec in MODELS:
        if wanted and spec[1] not in wanted:
            continue
        t0 = time.time()
        try:
            r = check_model(spec, args)
        except subprocess.TimeoutExpired:
            r = {"model": spec[1], "file": spec[0], "pass": False, "heads": [],
                 "error": "weft replay ran past %g s" % args.timeout}
        r["seconds"] = round(time.time() - t0, 1)
        results.append(r)
        print("%-18s %s  (%.1f s: MXNet and weights %.1f s, weft %.1f s)" %
              (spec[1], "ok" if r["pass"] else "FAIL", r["seconds"], r.get("mxnet_s", 0), r.get("weft_s", 0)),
              flush=True)
    for f in TVM_FILES:
        print("%-18s n/a: TVM graph-executor JSON, not an MXNet symbol (weft inspects it only)" % f[:18])
    print()
    print_table(results, args.fp64)
    summary = {"mxnet": mx.__version__, "numpy": np.__version__, "rtol": args.rtol,
               "atol_scale": args.atol_scale, "seed": args.seed, "models": results,
               "not_applicable": {f: "TVM graph-executor JSON, not an MXNet symbol" for f in TVM_FILES}}
    with open(os.path.join(args.out, "models.json"), "w") as f:
        json.dump(summary, f, indent=1)
    failed = [r["model"] for r in results if not r["pass"]]
    print("\n%d of %d models agree with MXNet%s" % (len(results) - len(failed), len(results),
                                                    ("; failing: " + ", ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
