#!/usr/bin/env python3
"""Allocation traces of MXNet models' forward passes, for weft's fragmentation benchmark.

Loads an MXNet symbol JSON (every layout: 0.8 legacy `param`/`attr` with 2-element inputs,
0.9-0.12 `attr`, >= 1.0 `attrs`), infers the output shape of every op node for given input
shapes (semantics and shape rules as in shared/OPS.md), and writes the allocation trace of the
forward pass executed op by op, in the file's (topological) node order:

  for each op node: allocate each visible output (float32: prod(shape) * 4 bytes), then free
  every op output among its inputs whose last consumer this node is, then free its own outputs
  that nothing consumes and that are not graph heads. Heads are freed at the end. Graph inputs
  and weights (variable nodes) are not part of the trace. Hidden outputs (BatchNorm's saved
  mean/var, Dropout's mask, CTCLoss's gradient) are not allocated: an inference executor does
  not need them.

Trace format (text, one event a line): `a <id> <bytes>` allocates, `f <id>` frees; lines starting
with `#` are comments (the header names the model, batch and input shapes). Standard library
only.

  alloc_trace.py --models-dir ../shared/models --out BUILD/memory_traces [--batch 1 32] [--quick]
  alloc_trace.py GRAPH.json --batch 1 --input data=N,3,224,224 -o out.trace
"""

import argparse
import json
import math
import os
import re
import sys

# Input shapes per model, N = batch. Only inputs whose shape the forward pass depends on are
# listed (data and recurrent initial states); labels and weights are never read for shapes.
#
# | file (models/..., abbreviated)     | short name         | inputs (N = batch)                   |
# |------------------------------------|--------------------|--------------------------------------|
# | apache__mxnet__save_000800         | mlp_legacy         | data (N,784): an MNIST-sized MLP     |
# | deepinsight__insightface__det1     | mtcnn_pnet         | data (N,3,288,384): P-Net's largest  |
# |                                    |                    |   pyramid level of a 640x480 frame   |
# |                                    |                    |   (min face 20: scale 0.6)           |
# | pathak-ashutosh__..__resnet-50     | resnet50_v2        | data (N,3,224,224)                   |
# | lucasjinreal__..__obama            | char_lstm          | data/0..128 (N,) token ids;          |
# |                                    |                    |   l{0,1,2}_init_{h,c} (N,512)        |
# |                                    |                    |   (h2h num_hidden 2048 = 4*512)      |
# | miaow1988__SqueezeNet_v1.2         | squeezenet_v1.2    | data (N,3,224,224) (13x13 at pool10) |
# | KeyKy__..__mobilenet_v2            | mobilenet_v2       | data (N,3,224,224)                   |
# | soeaver__..__inception_v3          | inception_v3       | data (N,3,299,299)                   |
# | soeaver__..__se-resnext50-32x4d    | se_resnext50       | data (N,3,224,224)                   |
# | apache__mxnet__test_mkldnn_..model1| vgg16_reduced      | data (N,3,300,300): SSD-300 base net |
# | bogireddytejareddy__..__mnet.25    | retinaface_mnet025 | data (N,3,640,640)                   |
# | Mengman__TensorRT_Tutorial__ocr    | ocr_crnn           | data (N,1,80,32): 80 rows = 20 time  |
# |                                    |                    |   steps x 4 (SliceChannel axis 2,    |
# |                                    |                    |   20-way), 32 columns -> 1 after 4   |
# |                                    |                    |   width-halving pools and the (3,2)  |
# |                                    |                    |   conv; l{0..3}_init_{h,c} (N,100)   |
# | fqararyah__..__resnet18_v1         | resnet50_v1        | data (N,3,224,224). Despite the file |
# |                                    |                    |   name the graph is a ResNet-50 v1   |
# |                                    |                    |   (53 convs, bottlenecks, 2048 ch.)  |
# | kylehoffpauir__AdvOSBig__net       | mlp_gluon          | data (N,784): the weights' input dim |
# |                                    |                    |   is deferred ("(128, 0)"); MNIST    |
# | MirrorYuChen__..__model (insight.) | mobilefacenet      | data (N,3,112,112)                   |
#
# The three TVM graph-executor files (`tvm_op` nodes) are not MXNet symbols and are skipped.

MODELS = [
    ("apache__mxnet__save_000800.json", "mlp_legacy", {"data": ("N", 784)}),
    ("deepinsight__insightface__det1-symbol.json", "mtcnn_pnet", {"data": ("N", 3, 288, 384)}),
    ("pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json", "resnet50_v2",
     {"data": ("N", 3, 224, 224)}),
    ("lucasjinreal__Char-Generator-LSTM__obama-symbol.json", "char_lstm",
     {r"re:data/\d+": ("N",), r"re:l\d_init_[hc]": ("N", 512)}),
    ("miaow1988__SqueezeNet_v1.2__model-symbol.json", "squeezenet_v1.2",
     {"data": ("N", 3, 224, 224)}),
    ("KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json", "mobilenet_v2",
     {"data": ("N", 3, 224, 224)}),
    ("soeaver__mxnet-model__inception_v3-symbol.json", "inception_v3",
     {"data": ("N", 3, 299, 299)}),
    ("soeaver__mxnet-model__se-resnext50-32x4d-symbol.json", "se_resnext50",
     {"data": ("N", 3, 224, 224)}),
    ("apache__mxnet__test_mkldnn_test_mkldnn_model_model1.json", "vgg16_reduced",
     {"data": ("N", 3, 300, 300)}),
    ("bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json", "retinaface_mnet025",
     {"data": ("N", 3, 640, 640)}),
    ("Mengman__TensorRT_Tutorial__ocr-symbol.json", "ocr_crnn",
     {"data": ("N", 1, 80, 32), r"re:l\d_init_[hc]": ("N", 100)}),
    ("fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json", "resnet50_v1",
     {"data": ("N", 3, 224, 224)}),
    ("kylehoffpauir__AdvOSBig__net-symbol.json", "mlp_gluon", {"data": ("N", 784)}),
    ("MirrorYuChen__tvm_insightface__model-symbol.json", "mobilefacenet",
     {"data": ("N", 3, 112, 112)}),
]

# --quick: a subset that still covers CNNs, a detector with FPN and a recurrent net.
QUICK = {"resnet50_v1", "mobilenet_v2", "retinaface_mnet025", "ocr_crnn", "mlp_legacy"}

ALIASES = {
    "_Plus": "elemwise_add", "_plus": "elemwise_add", "_add": "elemwise_add",
    "_Mul": "elemwise_mul", "_mul": "elemwise_mul",
    "_Minus": "elemwise_sub", "_minus": "elemwise_sub", "_sub": "elemwise_sub",
    "_Div": "elemwise_div", "_div": "elemwise_div",
    "Softmax": "SoftmaxOutput", "flatten": "Flatten", "reshape": "Reshape",
    "split": "SliceChannel", "concat": "Concat", "_rnn_param_concat": "Concat",
    "CTCLoss": "_contrib_CTCLoss", "_contrib_ctc_loss": "_contrib_CTCLoss",
    "ctc_loss": "_contrib_CTCLoss",
    "_MulScalar": "_mul_scalar", "_MinusScalar": "_minus_scalar", "_PlusScalar": "_plus_scalar",
    "_DivScalar": "_div_scalar", "broadcast_plus": "broadcast_add",
    "broadcast_minus": "broadcast_sub", "stop_gradient": "BlockGrad",
}

# Ops whose (only) output has the shape of their first input.
SAME_SHAPE = {
    "Activation", "BatchNorm", "Dropout", "BlockGrad", "MakeLoss", "softmax", "log_softmax",
    "SoftmaxActivation", "SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
    "LRN", "InstanceNorm", "L2Normalization", "LeakyReLU", "relu", "sigmoid", "tanh", "exp", "log",
    "sqrt", "square", "abs", "negative", "clip", "_copy", "identity", "Cast", "amp_cast",
    "_minus_scalar", "_plus_scalar", "_mul_scalar", "_div_scalar", "_rminus_scalar",
    "_rdiv_scalar", "_power_scalar", "elemwise_add", "elemwise_mul", "elemwise_sub",
    "elemwise_div", "zeros_like", "ones_like",
}
BROADCAST = {"broadcast_add", "broadcast_mul", "broadcast_sub", "broadcast_div",
             "broadcast_maximum", "broadcast_minimum"}


class ShapeError(Exception):
    pass


# ---- attribute parsing (OPS.md 1.3) ----------------------------------------------------------

def parse_tuple(text):
    if text is None:
        return None
    text = text.strip()
    if text in ("None", ""):
        return None
    inner = text.strip("()[] ")
    if not inner:
        return ()
    out = []
    for part in inner.split(","):
        part = part.strip()
        if not part:
            continue
        if part == "None":
            out.append(None)
            continue
        out.append(int(part.rstrip("Ll")))
    return tuple(out)


def parse_bool(text, default):
    if text is None:
        return default
    t = text.strip().lower()
    if t in ("true", "1"):
        return True
    if t in ("false", "0"):
        return False
    raise ShapeError("bad bool '%s'" % text)


def parse_int(text, default):
    if text is None or text.strip() == "None":
        return default
    return int(text.strip().rstrip("Ll"))


def node_attrs(node):
    """Merges attrs/attr, then param without overwriting (nnvm JSONNode::Load)."""
    merged = {}
    for key in ("attrs", "attr"):
        merged.update(node.get(key) or {})
    for k, v in (node.get("param") or {}).items():
        merged.setdefault(k, v)
    return merged


def spatial_param(attrs, key, rank, default):
    value = parse_tuple(attrs.get(key))
    if not value:
        return (default,) * rank
    if len(value) != rank:
        raise ShapeError("%s has %d dims, kernel has %d" % (key, len(value), rank))
    return value


# ---- shape inference per op -------------------------------------------------------------------

def infer_reshape(src, target, reverse):
    """MXNet InferReshapeShape (OPS.md, Reshape)."""
    src = list(src)
    target = list(target)
    if reverse:
        src.reverse()
        target.reverse()
    out = []
    inferred = -1
    i = 0  # cursor into src
    j = 0
    while j < len(target):
        code = target[j]
        if code == 0:
            out.append(src[i])
            i += 1
        elif code == -1:
            if inferred >= 0:
                raise ShapeError("Reshape: more than one -1")
            inferred = len(out)
            out.append(1)
            i += 1
        elif code == -2:
            out.extend(src[i:])
            i = len(src)
        elif code == -3:
            out.append(src[i] * src[i + 1])
            i += 2
        elif code == -4:
            d0 = src[i]
            a, b = target[j + 1], target[j + 2]
            j += 2
            if a == -1:
                a = d0 // b
            if b == -1:
                b = d0 // a
            if a * b != d0:
                raise ShapeError("Reshape: -4 split %d into %d x %d" % (d0, a, b))
            out.extend([a, b])
            i += 1
        elif code > 0:
            out.append(code)
            i += 1
        else:
            raise ShapeError("Reshape: bad code %d" % code)
        j += 1
    if inferred >= 0:
        known = math.prod(d for k, d in enumerate(out) if k != inferred)
        total = math.prod(src)
        if known == 0 or total % known:
            raise ShapeError("Reshape: cannot infer -1 (%s -> %s)" % (src, target))
        out[inferred] = total // known
    if reverse:
        out.reverse()
    if math.prod(out) != math.prod(src):
        raise ShapeError("Reshape: size changes %s -> %s" % (src, out))
    return tuple(out)


def conv_out(x, k, s, p, d):
    return (x + 2 * p - d * (k - 1) - 1) // s + 1


def infer_node(op, attrs, ins, name):
    """Returns the list of visible output shapes. `ins` are the input shapes (None = unknown)."""
    def need(i):
        if i >= len(ins) or ins[i] is None:
            raise ShapeError("%s '%s': shape of input %d unknown" % (op, name, i))
        return ins[i]

    if op in SAME_SHAPE:
        if op in ("elemwise_add", "elemwise_mul", "elemwise_sub", "elemwise_div"):
            known = [s for s in ins[:2] if s is not None]
            if not known:
                raise ShapeError("%s '%s': no input shape known" % (op, name))
            if len(known) == 2 and known[0] != known[1]:
                raise ShapeError("%s '%s': shapes %s and %s differ" % (op, name, known[0],
                                                                      known[1]))
            return [known[0]]
        data = need(0)
        if op == "BatchNorm" and parse_bool(attrs.get("output_mean_var"), False):
            axis = parse_int(attrs.get("axis"), 1) % len(data)
            return [data, (data[axis],), (data[axis],)]
        return [data]
    if op in BROADCAST:
        a, b = need(0), need(1)
        rank = max(len(a), len(b))
        a = (1,) * (rank - len(a)) + tuple(a)
        b = (1,) * (rank - len(b)) + tuple(b)
        out = []
        for x, y in zip(a, b):
            if x != y and x != 1 and y != 1:
                raise ShapeError("%s '%s': cannot broadcast %s and %s" % (op, name, a, b))
            out.append(max(x, y))
        return [tuple(out)]
    if op == "Convolution":
        data = need(0)
        kernel = parse_tuple(attrs["kernel"])
        r = len(kernel)
        stride = spatial_param(attrs, "stride", r, 1)
        pad = spatial_param(attrs, "pad", r, 0)
        dilate = spatial_param(attrs, "dilate", r, 1)
        spatial = tuple(conv_out(data[2 + i], kernel[i], stride[i], pad[i], dilate[i])
                        for i in range(r))
        if min(spatial) <= 0:
            raise ShapeError("Convolution '%s': empty output from %s" % (name, data))
        return [(data[0], parse_int(attrs["num_filter"], None)) + spatial]
    if op == "Deconvolution":
        data = need(0)
        kernel = parse_tuple(attrs["kernel"])
        r = len(kernel)
        stride = spatial_param(attrs, "stride", r, 1)
        pad = spatial_param(attrs, "pad", r, 0)
        dilate = spatial_param(attrs, "dilate", r, 1)
        adj = spatial_param(attrs, "adj", r, 0)
        target = parse_tuple(attrs.get("target_shape"))
        if target and any(target):
            spatial = tuple(target)
        else:
            spatial = tuple(stride[i] * (data[2 + i] - 1) + dilate[i] * (kernel[i] - 1) + 1 -
                            2 * pad[i] + adj[i] for i in range(r))
        return [(data[0], parse_int(attrs["num_filter"], None)) + spatial]
    if op == "Pooling":
        data = need(0)
        r = len(data) - 2
        if parse_bool(attrs.get("global_pool"), False):
            return [tuple(data[:2]) + (1,) * r]
        kernel = parse_tuple(attrs.get("kernel"))
        if not kernel:
            raise ShapeError("Pooling '%s': no kernel" % name)
        stride = spatial_param(attrs, "stride", r, 1)
        pad = spatial_param(attrs, "pad", r, 0)
        conv = attrs.get("pooling_convention", "valid")
        spatial = []
        for i in range(r):
            x = data[2 + i] + 2 * pad[i] - kernel[i]
            if conv == "valid":
                spatial.append(x // stride[i] + 1)
            elif conv == "full":
                spatial.append(-(-x // stride[i]) + 1)
            elif conv == "same":
                spatial.append(-(-data[2 + i] // stride[i]))
            else:
                raise ShapeError("Pooling '%s': convention %s" % (name, conv))
        return [tuple(data[:2]) + tuple(spatial)]
    if op == "FullyConnected":
        data = need(0)
        hidden = parse_int(attrs["num_hidden"], None)
        if parse_bool(attrs.get("flatten"), True):
            return [(data[0], hidden)]
        return [tuple(data[:-1]) + (hidden,)]
    if op == "Flatten":
        data = need(0)
        return [(data[0], math.prod(data[1:]))]
    if op == "Concat":
        n = parse_int(attrs.get("num_args"), len(ins))
        shapes = [need(i) for i in range(n)]
        dim = parse_int(attrs.get("dim"), 1) % len(shapes[0])
        out = list(shapes[0])
        out[dim] = sum(s[dim] for s in shapes)
        for s in shapes:
            if len(s) != len(out) or any(s[k] != out[k] for k in range(len(out)) if k != dim):
                raise ShapeError("Concat '%s': mismatched %s" % (name, shapes))
        return [tuple(out)]
    if op == "Reshape":
        data = need(0)
        shape = parse_tuple(attrs.get("shape"))
        if shape:
            return [infer_reshape(data, shape, parse_bool(attrs.get("reverse"), False))]
        target = list(parse_tuple(attrs.get("target_shape")) or ())
        if not target:
            raise ShapeError("Reshape '%s': no shape" % name)
        if parse_bool(attrs.get("keep_highest"), False):
            target[0] = data[0]
        if 0 in target:
            k = target.index(0)
            target[k] = 1
            target[k] = math.prod(data) // math.prod(target)
        return [tuple(target)]
    if op == "SliceChannel":
        data = need(0)
        n = parse_int(attrs["num_outputs"], None)
        axis = parse_int(attrs.get("axis"), 1) % len(data)
        if data[axis] % n:
            raise ShapeError("SliceChannel '%s': %d not divisible by %d" % (name, data[axis], n))
        out = list(data)
        out[axis] //= n
        if parse_bool(attrs.get("squeeze_axis"), False):
            if out[axis] != 1:
                raise ShapeError("SliceChannel '%s': squeeze of %d" % (name, out[axis]))
            del out[axis]
        return [tuple(out)] * n
    if op == "Embedding":
        return [tuple(need(0)) + (parse_int(attrs["output_dim"], None),)]
    if op == "UpSampling":
        scale = parse_int(attrs["scale"], None)
        first = need(0)
        if attrs.get("sample_type") == "bilinear":
            return [(first[0], first[1], first[2] * scale, first[3] * scale)]
        n = parse_int(attrs.get("num_args"), 1)
        shapes = [need(i) for i in range(n)]
        if attrs.get("multi_input_mode", "concat") == "sum":
            c = first[1]
        else:
            c = sum(s[1] for s in shapes)
        return [(first[0], c, first[2] * scale, first[3] * scale)]
    if op == "Crop":
        data = need(0)
        if parse_int(attrs.get("num_args"), 1) == 2:
            like = need(1)
            h, w = like[2], like[3]
        else:
            h, w = parse_tuple(attrs.get("h_w")) or (0, 0)
        if h > data[2] or w > data[3]:
            raise ShapeError("Crop '%s': %dx%d from %s" % (name, h, w, data))
        return [(data[0], data[1], h, w)]
    if op == "transpose":
        data = need(0)
        axes = parse_tuple(attrs.get("axes")) or tuple(reversed(range(len(data))))
        return [tuple(data[a] for a in axes)]
    if op == "expand_dims":
        data = list(need(0))
        axis = parse_int(attrs["axis"], None)
        if axis < 0:
            axis += len(data) + 1
        data.insert(axis, 1)
        return [tuple(data)]
    if op == "_contrib_CTCLoss":
        data = need(0)  # (T, N, alphabet)
        return [(data[1],)]
    raise ShapeError("op '%s' (node '%s') not supported" % (op, name))


# ---- the trace --------------------------------------------------------------------------------

def is_tvm_graph(graph):
    return any(n.get("op") == "tvm_op" for n in graph.get("nodes", []))


def input_shape_for(name, spec, batch):
    for key, shape in spec.items():
        matched = re.fullmatch(key[3:], name) if key.startswith("re:") else key == name
        if matched:
            return tuple(batch if d == "N" else d for d in shape)
    return None


def build_trace(graph, spec, batch):
    """Returns (events, peak_live_bytes, op_count). Events: ('a', id, bytes) / ('f', id)."""
    nodes = graph["nodes"]
    shapes = {}  # (nid, idx) -> shape
    for nid, node in enumerate(nodes):
        if node["op"] == "null":
            shape = input_shape_for(node["name"], spec, batch)
            if shape is not None:
                shapes[(nid, 0)] = shape
    op_of = [ALIASES.get(n["op"], n["op"]) for n in nodes]
    heads = {(h[0], h[1]) for h in graph["heads"]}
    last_use = {}
    for nid, node in enumerate(nodes):
        for entry in node["inputs"]:
            last_use[(entry[0], entry[1])] = nid
    events = []
    ids = {}
    live = 0
    peak = 0
    sizes = {}
    next_id = 0
    ops = 0

    def free(entry):
        nonlocal live
        tid = ids.pop(entry)
        live -= sizes.pop(tid)
        events.append(("f", tid))

    for nid, node in enumerate(nodes):
        op = op_of[nid]
        if op == "null":
            continue
        ops += 1
        ins = []
        for entry in node["inputs"]:
            src, idx = entry[0], entry[1]
            if src >= nid:
                raise ShapeError("node %d reads node %d: not topological" % (nid, src))
            ins.append(shapes.get((src, idx)))
        outs = infer_node(op, node_attrs(node), ins, node["name"])
        for idx, shape in enumerate(outs):
            shapes[(nid, idx)] = shape
            nbytes = math.prod(shape) * 4
            ids[(nid, idx)] = next_id
            sizes[next_id] = nbytes
            events.append(("a", next_id, nbytes))
            next_id += 1
            live += nbytes
        peak = max(peak, live)
        for entry in {(e[0], e[1]) for e in node["inputs"]}:
            if entry in ids and last_use.get(entry) == nid and entry not in heads:
                free(entry)
        for idx in range(len(outs)):
            entry = (nid, idx)
            if entry not in last_use and entry not in heads:
                free(entry)
    for entry in sorted(heads):
        if entry in ids:
            free(entry)
    if ids:
        raise ShapeError("internal: %d entries never freed" % len(ids))
    return events, peak, ops


def write_trace(path, events, header):
    with open(path, "w") as out:
        for line in header:
            out.write("# %s\n" % line)
        for ev in events:
            if ev[0] == "a":
                out.write("a %d %d\n" % (ev[1], ev[2]))
            else:
                out.write("f %d\n" % ev[1])


def make_trace(graph_path, short, spec, batch, out_dir):
    with open(graph_path) as f:
        graph = json.load(f)
    if is_tvm_graph(graph):
        raise ShapeError("TVM graph-executor file, not an MXNet symbol")
    events, peak, ops = build_trace(graph, spec, batch)
    inputs = ", ".join("%s=%s" % (k[3:] if k.startswith("re:") else k,
                                  "x".join(str(batch if d == "N" else d) for d in v))
                       for k, v in spec.items())
    path = os.path.join(out_dir, "%s_b%d.trace" % (short, batch))
    write_trace(path, events, [
        "weft allocation trace: forward pass, float32, op by op in file order",
        "model=%s batch=%d" % (short, batch),
        "source=%s" % os.path.basename(graph_path),
        "inputs: %s" % inputs,
        "ops=%d allocations=%d peak_live=%d" % (ops, sum(1 for e in events if e[0] == "a"),
                                                peak),
    ])
    return path, peak, ops, events


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graph", nargs="?", help="one graph JSON (else every known model)")
    parser.add_argument("--models-dir", default=None,
                        help="folder of the MXNet graph files (default: ../shared/models "
                             "relative to the repository root)")
    parser.add_argument("--out", "-o", default=".",
                        help="output folder (or file, with a single GRAPH)")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--quick", action="store_true", help="a subset of models, batch 1")
    parser.add_argument("--input", action="append", default=[],
                        help="with GRAPH: NAME=d0,d1,... (N = batch), repeatable")
    args = parser.parse_args()

    if args.graph:
        spec = {}
        for item in args.input or ["data=N,3,224,224"]:
            name, dims = item.split("=", 1)
            spec[name] = tuple(d if d == "N" else int(d) for d in dims.split(","))
        short = os.path.basename(args.graph).replace("-symbol", "").replace(".json", "")
        for batch in args.batch:
            try:
                path, peak, ops, events = make_trace(args.graph, short, spec, batch, args.out)
            except (ShapeError, KeyError, ValueError, IndexError, OSError) as err:
                print("error: %s b%d: %s" % (args.graph, batch, err), file=sys.stderr)
                return 1
            print("trace %s ops=%d events=%d peak_live=%d" % (path, ops, len(events), peak))
        return 0

    models_dir = args.models_dir
    if models_dir is None:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        models_dir = os.path.join(repo, "..", "shared", "models")
    os.makedirs(args.out, exist_ok=True)
    batches = [1] if args.quick else args.batch
    failures = 0
    for filename, short, spec in MODELS:
        if args.quick and short not in QUICK:
            continue
        graph_path = os.path.join(models_dir, filename)
        if not os.path.exists(graph_path):
            print("skip %s reason=missing_file(%s)" % (short, graph_path))
            failures += 1
            continue
        for batch in batches:
            try:
                path, peak, ops, events = make_trace(graph_path, short, spec, batch, args.out)
            except (ShapeError, KeyError, ValueError, IndexError, OSError) as err:
                print("skip %s b%d reason=%s" % (short, batch, str(err).replace(" ", "_")))
                failures += 1
                continue
            print("trace %s b%d ops=%d events=%d peak_live=%d file=%s" %
                  (short, batch, ops, len(events), peak, path))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
