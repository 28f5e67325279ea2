#!/usr/bin/env python3
"""Builds a PyTorch module from an MXNet symbol JSON and an MXNet .params file.

This is the peer of `weft replay` in the replay benchmark, and an independent numerical reference
for it: the same graph, the same weights, evaluated by PyTorch's CPU kernels.

Graph JSON (shared/OPS.md section 1): all three layouts are read. 0.8 "legacy" files keep op
params in `param` and user attrs in `attr` and write node entries as [nid, idx]; 0.9-0.12 files
keep both in `attr`; >= 1.0 files in `attrs`. The dicts are merged the way nnvm does (`attrs` and
`attr` first, then `param` without overwriting). Hidden keys (`__shape__`, `__lr_mult__`...) and
the legacy user keys (`lr_mult`, `ctx_group`, `<arg>_lr_mult`...) are never read as op params:
every kernel below looks up only the keys it knows. Files older than 0.9 did not store auxiliary
states, so a node with fewer inputs than its op declares gets the missing variables appended,
named `<node>_<argname>` (BatchNorm: `<bn>_moving_mean`, `<bn>_moving_var`), as MXNet's
legacy upgrade does.

Weights (shared/FORMATS.md): the .params reader handles V1/V2/V3 and magic-less dense records of
every numeric dtype (arrays are converted to float32 for the module); sparse records are refused.
`save_params` writes V2 dense records with `arg:`/`aux:` keys, as MXNet's Module.save_checkpoint.

Evaluation: `MXNetGraphModule.forward(*inputs)` walks the op nodes in file order (a topological
order), applies torch functional ops with inference semantics (shared/OPS.md section 3) and
returns the graph's heads as a tuple. Weights are registered as buffers so that torch.jit.trace +
torch.jit.freeze see them as constants (that is what lets freeze fold BatchNorm into the
convolutions). Intermediate values are dropped after their last consumer.

Only the standard library, numpy and torch are used.
"""

import json
import math
import re
import struct

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "GraphError", "Node", "SymbolGraph", "load_graph", "load_params", "save_params",
    "MXNetGraphModule", "random_params", "split_param_name",
]


class GraphError(ValueError):
    """A malformed graph, an attribute that cannot be parsed, or a missing array."""


# ---------------------------------------------------------------------------------------------
# Attribute parsing (OPS.md 1.3). Every value in the JSON is a string.

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def parse_bool(text, where=""):
    t = str(text).strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise GraphError(f"{where}: expected a bool (True/False/1/0), got '{text}'")


def parse_int(text, where=""):
    try:
        return int(str(text).strip().rstrip("Ll"))
    except ValueError:
        raise GraphError(f"{where}: expected an integer, got '{text}'") from None


def parse_float(text, where=""):
    t = str(text).strip()
    if t.lower() in ("inf", "+inf"):
        return math.inf
    if t.lower() == "-inf":
        return -math.inf
    try:
        return float(t)
    except ValueError:
        raise GraphError(f"{where}: expected a number, got '{text}'") from None


def parse_tuple(text, where=""):
    """'(3, 3)', '(3,3)', '(8L, 3L)', '[3, 3]', '()', '3' -> tuple of ints; 'None' -> None."""
    t = str(text).strip()
    if t in ("None", "none", ""):
        return None
    if t[0] in "([":
        close = ")" if t[0] == "(" else "]"
        if t[-1] != close:
            raise GraphError(f"{where}: unbalanced tuple '{text}'")
        body = t[1:-1].strip()
        if not body:
            return ()
        parts = [p.strip() for p in body.split(",")]
        if parts and parts[-1] == "":  # "(3,)"
            parts = parts[:-1]
    else:
        parts = [t]
    out = []
    for p in parts:
        p = p.rstrip("Ll")
        if p in ("None", "none"):
            out.append(None)
            continue
        try:
            out.append(int(p))
        except ValueError:
            raise GraphError(f"{where}: expected a tuple of integers, got '{text}'") from None
    return tuple(out)


class Attrs:
    """Typed access to one node's merged attribute dict, with errors naming node and key."""

    def __init__(self, node):
        self.node = node
        self.d = node.attrs

    def _where(self, key):
        return f"node {self.node.nid} '{self.node.name}' ({self.node.op}) attr '{key}'"

    def has(self, key):
        v = self.d.get(key)
        return v is not None and v not in ("None",)

    def str(self, key, default=None, choices=None):
        if key not in self.d:
            if default is None:
                raise GraphError(f"{self._where(key)}: required but missing")
            return default
        v = self.d[key]
        if choices is not None and v not in choices:
            raise GraphError(f"{self._where(key)}: '{v}' is not one of {sorted(choices)}")
        return v

    def bool(self, key, default):
        return parse_bool(self.d[key], self._where(key)) if key in self.d else default

    def int(self, key, default=None):
        if key not in self.d or self.d[key] == "None":
            if default is None:
                raise GraphError(f"{self._where(key)}: required but missing")
            return default
        return parse_int(self.d[key], self._where(key))

    def float(self, key, default=None):
        if key not in self.d or self.d[key] == "None":
            if default is None:
                raise GraphError(f"{self._where(key)}: required but missing")
            return default
        return parse_float(self.d[key], self._where(key))

    def tuple(self, key, default=None):
        """None when missing or 'None' (and no default)."""
        if key not in self.d:
            return default
        v = parse_tuple(self.d[key], self._where(key))
        return default if v is None else v


# ---------------------------------------------------------------------------------------------
# Graph loading (OPS.md section 1).

# Case-sensitive aliases (OPS.md 1.9) onto the names the kernels are registered under.
_ALIASES = {
    "_Plus": "elemwise_add", "_plus": "elemwise_add", "_add": "elemwise_add",
    "_Mul": "elemwise_mul", "_mul": "elemwise_mul",
    "_Minus": "elemwise_sub", "_minus": "elemwise_sub", "_sub": "elemwise_sub",
    "_Div": "elemwise_div", "_div": "elemwise_div",
    "Softmax": "SoftmaxOutput", "flatten": "Flatten", "reshape": "Reshape",
    "split": "SliceChannel", "concat": "Concat", "_rnn_param_concat": "Concat",
    "CTCLoss": "_contrib_CTCLoss", "_contrib_ctc_loss": "_contrib_CTCLoss", "ctc_loss": "_contrib_CTCLoss",
    "_MulScalar": "_mul_scalar", "_MinusScalar": "_minus_scalar", "_PlusScalar": "_plus_scalar",
    "_DivScalar": "_div_scalar", "_RMinusScalar": "_rminus_scalar", "_RDivScalar": "_rdiv_scalar",
    "broadcast_plus": "broadcast_add", "broadcast_minus": "broadcast_sub",
    "stop_gradient": "BlockGrad", "make_loss": "MakeLoss", "identity": "_copy",
}


def canonical_op(op):
    return _ALIASES.get(op, op)


class Node:
    __slots__ = ("nid", "op", "name", "inputs", "attrs", "raw_op")

    def __init__(self, nid, op, name, inputs, attrs, raw_op):
        self.nid = nid
        self.op = op            # canonical op name, "null" for variables
        self.raw_op = raw_op    # as written in the file
        self.name = name
        self.inputs = inputs    # list of (nid, output index)
        self.attrs = attrs      # merged dict, hidden keys included

    @property
    def is_variable(self):
        return self.op == "null"

    def __repr__(self):
        return f"Node({self.nid}, {self.raw_op}, {self.name!r})"


class SymbolGraph:
    """The parsed graph: nodes (variables included), heads, version and layout."""

    def __init__(self, nodes, heads, version, layout, upgraded):
        self.nodes = nodes
        self.heads = heads          # list of (nid, idx)
        self.version = version      # major*10000 + minor*100 + patch; 800 when absent
        self.layout = layout        # "legacy" | "attr" | "attrs"
        self.upgraded = upgraded    # variables were added by the 0.8 -> 0.9 upgrade

    def variables(self):
        return [n for n in self.nodes if n.is_variable]

    def op_nodes(self):
        return [n for n in self.nodes if not n.is_variable]

    def find_variable(self, name):
        for n in self.nodes:
            if n.is_variable and n.name == name:
                return n
        return None

    def aux_names(self):
        """Variables MXNet treats as auxiliary states (BatchNorm moving mean/var)."""
        names = set()
        for n in self.nodes:
            if n.op == "BatchNorm":
                for pos in (3, 4):
                    if pos < len(n.inputs):
                        names.add(self.nodes[n.inputs[pos][0]].name)
        return names

    def label_names(self):
        """Variables that only loss layers read as labels: not in the params file, zeros at inference."""
        labels = set()
        non_label_use = set()
        for n in self.nodes:
            for pos, (src, _) in enumerate(n.inputs):
                s = self.nodes[src]
                if not s.is_variable:
                    continue
                if pos in _LABEL_POSITIONS.get(n.op, ()):
                    labels.add(s.name)
                else:
                    non_label_use.add(s.name)
        return labels - non_label_use


# Input positions read as labels, per op (OPS.md 1.7).
_LABEL_POSITIONS = {
    "SoftmaxOutput": (1,), "LinearRegressionOutput": (1,), "LogisticRegressionOutput": (1,),
    "MAERegressionOutput": (1,), "SVMOutput": (1,), "_contrib_CTCLoss": (1, 2, 3),
}


def _node_attrs(raw):
    d = {}
    for key in ("attrs", "attr"):
        if isinstance(raw.get(key), dict):
            for k, v in raw[key].items():
                d[k] = str(v)
    if isinstance(raw.get("param"), dict):
        for k, v in raw["param"].items():
            d.setdefault(k, str(v))
    return d


def _argument_names(op, attrs):
    """The op's declared inputs (arguments then aux), used to name variables a 0.8 file lacks."""
    a = Attrs(Node(-1, op, "?", [], attrs, op))
    if op in ("Convolution", "FullyConnected"):
        return ["data", "weight"] + ([] if a.bool("no_bias", False) else ["bias"])
    if op == "Deconvolution":
        return ["data", "weight"] + ([] if a.bool("no_bias", True) else ["bias"])
    if op == "BatchNorm":
        return ["data", "gamma", "beta", "moving_mean", "moving_var"]
    if op == "LeakyReLU":
        return ["data", "gamma"] if attrs.get("act_type", "leaky") == "prelu" else ["data"]
    if op in _LABEL_POSITIONS and op != "_contrib_CTCLoss":
        return ["data", "label"]
    if op == "Embedding":
        return ["data", "weight"]
    return None


def load_graph(path_or_dict):
    """Parses an MXNet symbol JSON file (or an already decoded dict) into a SymbolGraph.

    Node ids are the file's. Variables added by the 0.8 -> 0.9 upgrade are appended after the
    file's nodes, so they follow their consumer: evaluate variables before walking the op nodes.
    """
    if isinstance(path_or_dict, dict):
        j, src = path_or_dict, "<dict>"
    else:
        src = str(path_or_dict)
        with open(src, "r", encoding="utf-8") as f:
            try:
                j = json.load(f)
            except json.JSONDecodeError as e:
                raise GraphError(f"{src}: not valid JSON: {e}") from None
    if not isinstance(j, dict) or not isinstance(j.get("nodes"), list) or "heads" not in j:
        raise GraphError(f"{src}: not an MXNet symbol JSON (needs 'nodes' and 'heads')")
    version = 800
    gattrs = j.get("attrs") or {}
    if "mxnet_version" in gattrs:
        v = gattrs["mxnet_version"]
        version = int(v[1] if isinstance(v, list) else v)
    raw_nodes = j["nodes"]
    layout = "attrs"
    if any("param" in n for n in raw_nodes):
        layout = "legacy"
    elif any("attr" in n for n in raw_nodes):
        layout = "attr"

    nodes = []
    for nid, rn in enumerate(raw_nodes):
        if "op" not in rn or "name" not in rn:
            raise GraphError(f"{src}: node {nid} lacks 'op' or 'name'")
        raw_op = rn["op"]
        inputs = []
        for k, e in enumerate(rn.get("inputs", [])):
            if not isinstance(e, list) or len(e) < 2:
                raise GraphError(f"{src}: node {nid} '{rn['name']}' input {k}: expected [nid, idx(, ver)], got {e}")
            src_nid, idx = int(e[0]), int(e[1])
            if not 0 <= src_nid < nid:
                raise GraphError(f"{src}: node {nid} '{rn['name']}' input {k} refers to node {src_nid}, "
                                 "which does not precede it")
            inputs.append((src_nid, idx))
        attrs = _node_attrs(rn)
        op = "null" if raw_op == "null" else canonical_op(raw_op)
        nodes.append(Node(nid, op, rn["name"], inputs, attrs, raw_op))

    # 0.8 -> 0.9 upgrade: append the variables that old files did not store.
    upgraded = False
    if version < 900:
        for n in list(nodes):
            if n.is_variable:
                continue
            names = _argument_names(n.op, n.attrs)
            if names is None or len(n.inputs) >= len(names):
                continue
            for argname in names[len(n.inputs):]:
                var = Node(len(nodes), "null", f"{n.name}_{argname}", [], dict(n.attrs), "null")
                nodes.append(var)
                n.inputs.append((var.nid, 0))
                upgraded = True

    heads = []
    for k, h in enumerate(j["heads"]):
        if not isinstance(h, list) or len(h) < 2 or not 0 <= int(h[0]) < len(raw_nodes):
            raise GraphError(f"{src}: head {k} is malformed: {h}")
        heads.append((int(h[0]), int(h[1])))
    return SymbolGraph(nodes, heads, version, layout, upgraded)


# ---------------------------------------------------------------------------------------------
# .params files (FORMATS.md).

_MAGIC_FILE = 0x112
_MAGIC_V1 = 0xF993FAC8
_MAGIC_V2 = 0xF993FAC9
_MAGIC_V3 = 0xF993FACA
_TYPE_FLAGS = {
    0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8, 6: np.int64,
    7: np.bool_, 8: np.int16, 9: np.uint16, 10: np.uint32, 11: np.uint64,
}


class _Reader:
    def __init__(self, data, path):
        self.data = data
        self.pos = 0
        self.path = path

    def take(self, n, what):
        if self.pos + n > len(self.data):
            raise GraphError(f"{self.path}: truncated while reading {what} at byte {self.pos}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self, what):
        return struct.unpack("<I", self.take(4, what))[0]

    def i32(self, what):
        return struct.unpack("<i", self.take(4, what))[0]

    def u64(self, what):
        return struct.unpack("<Q", self.take(8, what))[0]

    def i64s(self, n, what):
        return list(struct.unpack(f"<{n}q", self.take(8 * n, what)))


def _read_array(r, k):
    what = f"array {k}"
    first = r.u32(what + " magic")
    if first in (_MAGIC_V2, _MAGIC_V3):
        stype = r.i32(what + " storage type")
        if stype != 0:
            raise GraphError(f"{r.path}: {what} has storage type {stype} (sparse); only dense arrays are supported")
        ndim = r.i32(what + " ndim")
        # A "none" array ends here. Under V3's NumPy-shape semantics ndim 0 is a scalar (MXNet's
        # NDArray::Load tests shape_is_known) and only ndim -1 is none.
        if ndim < 0 or (ndim == 0 and first == _MAGIC_V2):
            return None
        shape = r.i64s(ndim, what + " shape")
    elif first == _MAGIC_V1:
        ndim = r.i32(what + " ndim")
        if ndim <= 0:
            return None
        shape = r.i64s(ndim, what + " shape")
    else:  # no magic: the first u32 is ndim, dims are u32
        ndim = first
        if ndim > 32:
            raise GraphError(f"{r.path}: {what}: unknown record magic 0x{first:08X}")
        if ndim == 0:
            return None
        shape = list(struct.unpack(f"<{ndim}I", r.take(4 * ndim, what + " shape")))
    r.i32(what + " device type")
    r.i32(what + " device id")
    flag = r.i32(what + " type flag")
    if flag not in _TYPE_FLAGS:
        raise GraphError(f"{r.path}: {what} has unsupported type flag {flag}")
    dt = np.dtype(_TYPE_FLAGS[flag]).newbyteorder("<")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = r.take(count * dt.itemsize, what + " data")
    return np.frombuffer(raw, dtype=dt).reshape(shape).copy()


def load_params(path):
    """Reads an MXNet .params file: returns a list of (name, numpy array) in file order."""
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(data, path)
    magic = r.u64("file magic")
    if magic != _MAGIC_FILE:
        raise GraphError(f"{path}: not an MXNet .params file (magic 0x{magic:X}, expected 0x112)")
    r.u64("reserved")
    count = r.u64("array count")
    if count > len(data):
        raise GraphError(f"{path}: implausible array count {count}")
    arrays = [_read_array(r, k) for k in range(count)]
    n_names = r.u64("name count")
    if n_names not in (0, count):
        raise GraphError(f"{path}: {count} arrays but {n_names} names")
    names = []
    for k in range(n_names):
        ln = r.u64(f"name {k} length")
        names.append(r.take(ln, f"name {k}").decode("utf-8"))
    if not names:
        names = [str(k) for k in range(count)]
    return list(zip(names, arrays))


def save_params(path, items):
    """Writes (name, array) pairs as an MXNet V2 dense .params file (arrays stored as given dtype)."""
    flags = {np.dtype(v): k for k, v in _TYPE_FLAGS.items()}
    out = [struct.pack("<QQQ", _MAGIC_FILE, 0, len(items))]
    for name, a in items:
        a = np.ascontiguousarray(a)
        if a.dtype not in flags:
            raise GraphError(f"save_params: '{name}' has unsupported dtype {a.dtype}")
        if a.ndim == 0:
            a = a.reshape(1)
        out.append(struct.pack("<Iii", _MAGIC_V2, 0, a.ndim))
        out.append(struct.pack(f"<{a.ndim}q", *a.shape))
        out.append(struct.pack("<iii", 1, 0, flags[a.dtype]))
        out.append(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    out.append(struct.pack("<Q", len(items)))
    for name, _ in items:
        b = name.encode("utf-8")
        out.append(struct.pack("<Q", len(b)) + b)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def split_param_name(key):
    """'arg:conv0_weight' -> ('arg', 'conv0_weight'); a plain name -> ('', name)."""
    if key.startswith("arg:") or key.startswith("aux:"):
        return key[:3], key[4:]
    return "", key


# ---------------------------------------------------------------------------------------------
# Kernels. make_kernel(node) parses the node's attributes once and returns fn(inputs) -> outputs
# (a list of tensors, the op's visible outputs). Inputs can be None only at label positions.

_KERNELS = {}


def _kernel(*names):
    def reg(factory):
        for n in names:
            _KERNELS[n] = factory
        return factory
    return reg


def _nd_fn(kind, nd, where):
    table = {
        "conv": (F.conv1d, F.conv2d, F.conv3d), "deconv": (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d),
        "max": (F.max_pool1d, F.max_pool2d, F.max_pool3d),
    }
    if not 1 <= nd <= 3:
        raise GraphError(f"{where}: {nd}-D {kind} is not supported (1-D, 2-D or 3-D)")
    return table[kind][nd - 1]


def _spatial(a, key, nd, fill):
    v = a.tuple(key)
    if not v:
        return (fill,) * nd
    if len(v) != nd:
        raise GraphError(f"{a._where(key)}: has {len(v)} values, the kernel has {nd} dims")
    return tuple(v)


@_kernel("Convolution")
def _k_conv(node, a):
    kernel = a.tuple("kernel")
    if not kernel:
        raise GraphError(f"{a._where('kernel')}: required but missing")
    nd = len(kernel)
    stride, dilate, pad = _spatial(a, "stride", nd, 1), _spatial(a, "dilate", nd, 1), _spatial(a, "pad", nd, 0)
    groups = a.int("num_group", 1)
    no_bias = a.bool("no_bias", False)
    layout = a.str("layout", "None")
    if layout not in ("None", "NCW", "NCHW", "NCDHW"):
        raise NotImplementedError(f"node {node.nid} '{node.name}': Convolution layout {layout} (CPU runs NC* only)")
    conv = _nd_fn("conv", nd, a._where("kernel"))

    def run(ins):
        bias = None if no_bias else ins[2]
        return [conv(ins[0], ins[1], bias, stride, pad, dilate, groups)]
    return run


@_kernel("Deconvolution")
def _k_deconv(node, a):
    kernel = a.tuple("kernel")
    nd = len(kernel)
    stride, dilate, pad = _spatial(a, "stride", nd, 1), _spatial(a, "dilate", nd, 1), _spatial(a, "pad", nd, 0)
    adj = _spatial(a, "adj", nd, 0)
    if a.tuple("target_shape"):
        raise NotImplementedError(f"node {node.nid} '{node.name}': Deconvolution target_shape")
    groups = a.int("num_group", 1)
    no_bias = a.bool("no_bias", True)
    deconv = _nd_fn("deconv", nd, a._where("kernel"))

    def run(ins):
        return [deconv(ins[0], ins[1], None if no_bias else ins[2], stride, pad, adj, groups, dilate)]
    return run


@_kernel("BatchNorm")
def _k_bn(node, a):
    eps = a.float("eps", 1e-3)
    fix_gamma = a.bool("fix_gamma", True)
    axis = a.int("axis", 1)
    if a.bool("output_mean_var", False):
        raise NotImplementedError(f"node {node.nid} '{node.name}': BatchNorm output_mean_var=True")

    def run(ins):
        x, gamma, beta, mean, var = ins
        # Inference always uses the moving statistics; fix_gamma ignores the stored gamma (a
        # None weight is a weight of ones).
        weight = None if fix_gamma else gamma
        ax = axis % x.dim()
        if ax != 1:
            y = F.batch_norm(x.movedim(ax, 1), mean, var, weight, beta, False, 0.0, eps)
            return [y.movedim(1, ax)]
        return [F.batch_norm(x, mean, var, weight, beta, False, 0.0, eps)]
    return run


@_kernel("Activation")
def _k_act(node, a):
    t = a.str("act_type", choices={"relu", "sigmoid", "tanh", "softrelu", "softsign"})
    fn = {
        "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
        # MXNet's softrelu returns x itself above 20, as softplus(threshold=20) does.
        "softrelu": lambda x: F.softplus(x, 1.0, 20.0), "softsign": F.softsign,
    }[t]
    return lambda ins: [fn(ins[0])]


@_kernel("LeakyReLU")
def _k_leaky(node, a):
    t = a.str("act_type", "leaky", choices={"leaky", "prelu", "elu", "selu", "gelu", "rrelu"})
    slope = a.float("slope", 0.25)
    if t == "leaky":
        return lambda ins: [F.leaky_relu(ins[0], slope)]
    if t == "rrelu":  # inference uses the mean of the bounds
        s = (a.float("lower_bound", 0.125) + a.float("upper_bound", 0.334)) / 2
        return lambda ins: [F.leaky_relu(ins[0], s)]
    if t == "elu":
        return lambda ins: [F.elu(ins[0], slope)]
    if t == "selu":
        return lambda ins: [F.selu(ins[0])]
    if t == "gelu":
        return lambda ins: [F.gelu(ins[0])]

    def prelu(ins):
        x, g = ins
        return [F.prelu(x, g.reshape(-1))]
    return prelu


def _pool_out_mx(x, k, s, p, full):
    n = x + 2 * p - k
    return (-(-n // s) if full else n // s) + 1


def _pool_out_torch(x, k, s, p, ceil):
    o = (x + 2 * p - k + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= x + p:
        o -= 1
    return o


def _avg_divisor(xs, ks, ss, ps, outs, include_pad, like):
    """MXNet's per-window divisor (pool.h), separable over the spatial dims, as a tensor."""
    div = None
    for x, k, s, p, o in zip(xs, ks, ss, ps, outs):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, x + p)
        size = end - start
        if not include_pad:
            size = np.minimum(end, x) - np.maximum(start, 0)
        size = np.maximum(size, 1).astype(np.float32)
        div = size if div is None else np.multiply.outer(div, size)
    return torch.from_numpy(np.ascontiguousarray(div)).to(like.dtype)


@_kernel("Pooling")
def _k_pool(node, a):
    pool_type = a.str("pool_type", "max", choices={"max", "avg", "sum", "lp"})
    if pool_type == "lp":
        raise NotImplementedError(f"node {node.nid} '{node.name}': lp pooling")
    if a.has("output_size") and a.tuple("output_size"):
        raise NotImplementedError(f"node {node.nid} '{node.name}': adaptive pooling (output_size)")
    global_pool = a.bool("global_pool", False)
    conv = a.str("pooling_convention", "valid", choices={"valid", "full", "same"})
    count_include_pad = a.bool("count_include_pad", True)
    layout = a.str("layout", "None")
    if layout not in ("None", "NCW", "NCHW", "NCDHW"):
        raise NotImplementedError(f"node {node.nid} '{node.name}': Pooling layout {layout}")

    if global_pool:
        def run_global(ins):
            x = ins[0]
            dims = tuple(range(2, x.dim()))
            if pool_type == "max":
                return [x.amax(dim=dims, keepdim=True)]
            if pool_type == "avg":
                return [x.mean(dim=dims, keepdim=True)]
            return [x.sum(dim=dims, keepdim=True)]
        return run_global

    kernel = a.tuple("kernel")
    if not kernel:
        raise GraphError(f"{a._where('kernel')}: required unless global_pool")
    nd = len(kernel)
    stride, pad = _spatial(a, "stride", nd, 1), _spatial(a, "pad", nd, 0)
    if conv == "same":
        raise NotImplementedError(f"node {node.nid} '{node.name}': pooling_convention=same")
    full = conv == "full"
    cache = {}

    def plan(shape):
        xs = tuple(shape[2:])
        if len(xs) != nd:
            raise GraphError(f"node {node.nid} '{node.name}': {nd}-D kernel on input of shape {tuple(shape)}")
        outs = tuple(_pool_out_mx(x, k, s, p, full) for x, k, s, p in zip(xs, kernel, stride, pad))
        if any(o <= 0 for o in outs):
            raise GraphError(f"node {node.nid} '{node.name}': pooling of {tuple(shape)} gives output {outs}")
        # torch's own padding reproduces MXNet when it gives the same output size and pad <= k/2.
        fast = all(_pool_out_torch(x, k, s, p, full) == o and 2 * p <= k
                   for x, k, s, p, o in zip(xs, kernel, stride, pad, outs))
        # Otherwise: pad explicitly (right pad chosen so that a padding-free window walk gives
        # MXNet's output size; negative pads crop) and, for avg, divide by MXNet's divisors.
        pads = []
        for x, k, s, p, o in reversed(list(zip(xs, kernel, stride, pad, outs))):
            pads += [p, (o - 1) * s + k - x - p]
        return fast, outs, pads

    def run(ins):
        x = ins[0]
        key = tuple(int(d) for d in x.shape)
        if key not in cache:
            cache[key] = plan(key)
        fast, outs, pads = cache[key]
        if pool_type == "max":
            fn = _nd_fn("max", nd, a._where("kernel"))
            if fast:
                return [fn(x, kernel, stride, pad, 1, full)]
            # Padding holds the lowest float, as MXNet's max starts from it: a window that
            # lies wholly in the padding yields that value, as in MXNet.
            return [fn(F.pad(x, pads, value=torch.finfo(x.dtype).min), kernel, stride, 0)]
        # avg / sum through avg_pool with divisor_override=1 (a sum), 1-D lifted to 2-D.
        y = x.unsqueeze(2) if nd == 1 else x
        k2 = (1,) + kernel if nd == 1 else kernel
        s2 = (1,) + stride if nd == 1 else stride
        avg = F.avg_pool3d if y.dim() == 5 else F.avg_pool2d
        if fast:
            p2 = (0,) + pad if nd == 1 else pad
            if pool_type == "avg":
                r = avg(y, k2, s2, p2, full, count_include_pad)
            else:
                r = avg(y, k2, s2, p2, full, True, 1)
        else:
            r = avg(F.pad(y, pads), k2, s2, 0, False, True, 1)
            if pool_type == "avg":
                r = r / _avg_divisor(key[2:], kernel, stride, pad, outs, count_include_pad, r).reshape(r.shape[2:])
        return [r.squeeze(2) if nd == 1 else r]
    return run


@_kernel("FullyConnected")
def _k_fc(node, a):
    no_bias = a.bool("no_bias", False)
    flatten = a.bool("flatten", True)

    def run(ins):
        x = ins[0]
        if flatten and x.dim() != 2:
            x = torch.flatten(x, 1) if x.dim() > 1 else x.reshape(-1, 1)
        return [F.linear(x, ins[1], None if no_bias else ins[2])]
    return run


@_kernel("Flatten")
def _k_flatten(node, a):
    return lambda ins: [torch.flatten(ins[0], 1) if ins[0].dim() > 1 else ins[0].reshape(-1, 1)]


@_kernel("Concat")
def _k_concat(node, a):
    dim = a.int("dim", 1)
    n = a.int("num_args", len(node.inputs))
    if n != len(node.inputs):
        raise GraphError(f"node {node.nid} '{node.name}': num_args={n} but {len(node.inputs)} inputs")
    return lambda ins: [torch.cat(ins, dim)]


def _same_shape(node, fn):
    def run(ins):
        if ins[0].shape != ins[1].shape:
            raise GraphError(f"node {node.nid} '{node.name}' ({node.raw_op}): shapes {tuple(ins[0].shape)} and "
                             f"{tuple(ins[1].shape)} differ (no broadcasting)")
        return [fn(ins[0], ins[1])]
    return run


@_kernel("elemwise_add")
def _k_add(node, a):
    return _same_shape(node, torch.add)


@_kernel("elemwise_mul")
def _k_mul(node, a):
    return _same_shape(node, torch.mul)


@_kernel("elemwise_sub")
def _k_sub(node, a):
    return _same_shape(node, torch.sub)


@_kernel("elemwise_div")
def _k_div(node, a):
    return _same_shape(node, torch.div)


_BROADCAST = {"broadcast_add": torch.add, "broadcast_mul": torch.mul, "broadcast_sub": torch.sub,
              "broadcast_div": torch.div, "broadcast_maximum": torch.maximum, "broadcast_minimum": torch.minimum}


@_kernel(*_BROADCAST)
def _k_broadcast(node, a):
    fn = _BROADCAST[node.op]
    return lambda ins: [fn(ins[0], ins[1])]


_SCALAR = {
    "_plus_scalar": lambda x, s: x + s, "_minus_scalar": lambda x, s: x - s, "_rminus_scalar": lambda x, s: s - x,
    "_mul_scalar": lambda x, s: x * s, "_div_scalar": lambda x, s: x / s, "_rdiv_scalar": lambda x, s: s / x,
    "_power_scalar": lambda x, s: torch.pow(x, s), "_maximum_scalar": lambda x, s: torch.clamp(x, min=s),
    "_minimum_scalar": lambda x, s: torch.clamp(x, max=s),
}


@_kernel(*_SCALAR)
def _k_scalar(node, a):
    fn = _SCALAR[node.op]
    s = a.float("scalar", 1.0)
    return lambda ins: [fn(ins[0], s)]


@_kernel("clip")
def _k_clip(node, a):
    lo, hi = a.float("a_min"), a.float("a_max")
    return lambda ins: [torch.clamp(ins[0], lo, hi)]


_UNARY = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp, "log": torch.log,
          "sqrt": torch.sqrt, "abs": torch.abs, "negative": torch.neg, "square": torch.square}


@_kernel(*_UNARY)
def _k_unary(node, a):
    fn = _UNARY[node.op]
    return lambda ins: [fn(ins[0])]


@_kernel("Dropout")
def _k_dropout(node, a):
    mode = a.str("mode", "training", choices={"training", "always"})
    if mode == "always" and a.float("p", 0.5) > 0:
        raise NotImplementedError(f"node {node.nid} '{node.name}': Dropout mode=always is random at inference")
    return lambda ins: [ins[0]]  # the mask output is hidden: nothing consumes it


@_kernel("BlockGrad", "MakeLoss", "_copy")
def _k_identity(node, a):
    return lambda ins: [ins[0]]


@_kernel("SoftmaxOutput")
def _k_softmax_output(node, a):
    multi = a.bool("multi_output", False)
    preserve = a.bool("preserve_shape", False)

    def run(ins):
        x = ins[0]
        if multi:
            return [torch.softmax(x, 1)]
        if preserve:
            return [torch.softmax(x, -1)]
        if x.dim() == 2:
            return [torch.softmax(x, 1)]
        # The default views the data as (d0, rest) and normalises all non-batch elements jointly.
        return [torch.softmax(torch.flatten(x, 1), 1).reshape(x.shape)]
    return run


@_kernel("LinearRegressionOutput", "MAERegressionOutput")
def _k_regression(node, a):
    return lambda ins: [ins[0]]


@_kernel("LogisticRegressionOutput")
def _k_logistic(node, a):
    return lambda ins: [torch.sigmoid(ins[0])]


@_kernel("SoftmaxActivation")
def _k_softmax_act(node, a):
    mode = a.str("mode", "instance", choices={"instance", "channel"})
    if mode == "channel":
        return lambda ins: [torch.softmax(ins[0], 1)]
    return lambda ins: [torch.softmax(ins[0], -1)]


@_kernel("softmax")
def _k_softmax(node, a):
    axis = a.int("axis", -1)
    temp = a.float("temperature", 1.0)
    if a.bool("use_length", False):
        raise NotImplementedError(f"node {node.nid} '{node.name}': softmax use_length=True")
    if temp != 1.0:
        return lambda ins: [torch.softmax(ins[0] / temp, axis)]
    return lambda ins: [torch.softmax(ins[0], axis)]


@_kernel("log_softmax")
def _k_log_softmax(node, a):
    axis = a.int("axis", -1)
    return lambda ins: [torch.log_softmax(ins[0], axis)]


def reshape_target(shape_param, dshape, reverse=False):
    """MXNet's InferReshapeShape: special values 0, -1, -2, -3, -4 read with a source-dim cursor."""
    src = list(dshape)
    params = list(shape_param)
    if reverse:
        src.reverse()
        params.reverse()
    out = []
    infer_at = -1
    i = j = 0
    while i < len(params):
        d = params[i]
        if d == 0:
            if j >= len(src):
                raise GraphError(f"Reshape {tuple(shape_param)} of {tuple(dshape)}: 0 has no source dim")
            out.append(src[j])
            j += 1
        elif d == -1:
            if infer_at >= 0:
                raise GraphError(f"Reshape {tuple(shape_param)}: more than one -1")
            infer_at = len(out)
            out.append(1)
            j += 1
        elif d == -2:
            out.extend(src[j:])
            j = len(src)
        elif d == -3:
            if j + 1 >= len(src):
                raise GraphError(f"Reshape {tuple(shape_param)} of {tuple(dshape)}: -3 needs two source dims")
            out.append(src[j] * src[j + 1])
            j += 2
        elif d == -4:
            if i + 2 >= len(params) or j >= len(src):
                raise GraphError(f"Reshape {tuple(shape_param)} of {tuple(dshape)}: -4 needs two values and a dim")
            d0, d1, d2 = src[j], params[i + 1], params[i + 2]
            j += 1
            i += 2
            if d1 == -1 and d2 == -1:
                raise GraphError(f"Reshape {tuple(shape_param)}: -4 split dims cannot both be -1")
            if d1 == -1:
                d1 = d0 // d2
            if d2 == -1:
                d2 = d0 // d1
            if d1 * d2 != d0:
                raise GraphError(f"Reshape {tuple(shape_param)} of {tuple(dshape)}: -4 split {d1}x{d2} != {d0}")
            out += [d1, d2]
        elif d > 0:
            out.append(d)
            j += 1
        else:
            raise GraphError(f"Reshape {tuple(shape_param)}: invalid value {d}")
        i += 1
    total = int(np.prod(dshape, dtype=np.int64))
    if infer_at >= 0:
        rest = int(np.prod(out, dtype=np.int64))
        out[infer_at] = total // rest if rest else 0
    if reverse:
        out.reverse()
    if int(np.prod(out, dtype=np.int64)) != total:
        raise GraphError(f"Reshape {tuple(shape_param)} of {tuple(dshape)} gives {tuple(out)}: size differs")
    return tuple(out)


@_kernel("Reshape")
def _k_reshape(node, a):
    shape = a.tuple("shape", ())
    reverse = a.bool("reverse", False)
    target = a.tuple("target_shape", ())
    keep_highest = a.bool("keep_highest", False)
    if not shape and not target:
        raise GraphError(f"node {node.nid} '{node.name}': Reshape needs shape (or the deprecated target_shape)")

    def run(ins):
        x = ins[0]
        if shape:
            return [x.reshape(reshape_target(shape, tuple(x.shape), reverse))]
        # Deprecated path: a single 0 in target_shape is inferred; keep_highest replaces the
        # first target dim with the input's.
        t = list(target)
        if keep_highest:
            t[0] = x.shape[0]
        t = [-1 if d == 0 else d for d in t]
        return [x.reshape(t)]
    return run


@_kernel("SliceChannel")
def _k_slice_channel(node, a):
    n = a.int("num_outputs")
    axis = a.int("axis", 1)
    squeeze = a.bool("squeeze_axis", False)

    def run(ins):
        x = ins[0]
        ax = axis % x.dim()
        d = x.shape[ax]
        if d % n:
            raise GraphError(f"node {node.nid} '{node.name}': axis {ax} of size {d} does not split into {n}")
        parts = torch.split(x, d // n, ax)
        if squeeze:
            if d != n:
                raise GraphError(f"node {node.nid} '{node.name}': squeeze_axis needs axis size == num_outputs")
            parts = [p.squeeze(ax) for p in parts]
        return list(parts)
    return run


@_kernel("Embedding")
def _k_embedding(node, a):
    input_dim = a.int("input_dim")

    def run(ins):
        idx = ins[0].to(torch.int64).clamp(0, input_dim - 1)  # MXNet clips out-of-range indices
        return [F.embedding(idx, ins[1])]
    return run


@_kernel("UpSampling")
def _k_upsampling(node, a):
    scale = a.int("scale")
    sample_type = a.str("sample_type", choices={"nearest", "bilinear"})
    mode = a.str("multi_input_mode", "concat", choices={"concat", "sum"})
    if sample_type == "bilinear":
        k = 2 * scale - scale % 2
        p = int(math.ceil((scale - 1) / 2.0))

        def bilinear(ins):
            x, w = ins
            return [F.conv_transpose2d(x, w, None, scale, p, 0, x.shape[1])]
        return bilinear

    def nearest(ins):
        # Python ints: under torch.jit.trace sizes are tensors, which interpolate's scale_factor
        # does not take (the trace is specialised to the input shapes anyway).
        h0, w0 = int(ins[0].shape[2]) * scale, int(ins[0].shape[3]) * scale
        outs = []
        for x in ins:
            if h0 % int(x.shape[2]) or w0 % int(x.shape[3]):
                raise GraphError(f"node {node.nid} '{node.name}': input {tuple(x.shape)} does not upsample to {h0}x{w0}")
            f = h0 // int(x.shape[2])
            outs.append(x if f == 1 else F.interpolate(x, scale_factor=f, mode="nearest"))
        if len(outs) == 1:
            return outs
        if mode == "sum":
            y = outs[0]
            for o in outs[1:]:
                y = y + o
            return [y]
        return [torch.cat(outs, 1)]
    return nearest


@_kernel("Crop")
def _k_crop(node, a):
    n = a.int("num_args")
    offset = a.tuple("offset", (0, 0))
    h_w = a.tuple("h_w", (0, 0))
    center = a.bool("center_crop", False)

    def run(ins):
        x = ins[0]
        h, w = (ins[1].shape[2], ins[1].shape[3]) if n == 2 else h_w
        H, W = x.shape[2], x.shape[3]
        y0, x0 = ((H - h) // 2, (W - w) // 2) if center else offset
        if y0 < 0 or x0 < 0 or y0 + h > H or x0 + w > W:
            raise GraphError(f"node {node.nid} '{node.name}': crop {h}x{w} at ({y0},{x0}) outside {H}x{W}")
        return [x[:, :, y0:y0 + h, x0:x0 + w]]
    return run


@_kernel("_contrib_CTCLoss")
def _k_ctc(node, a):
    use_data_len = a.bool("use_data_lengths", False)
    use_label_len = a.bool("use_label_lengths", False)
    blank_last = a.str("blank_label", "first", choices={"first", "last"}) == "last"

    def run(ins):
        data = ins[0]
        T, N, A = data.shape
        label = ins[1] if len(ins) > 1 and ins[1] is not None else torch.zeros(N, 1)
        label = label.to(torch.int64)
        pad_value = -1 if blank_last else 0
        blank = A - 1 if blank_last else 0
        k = 2
        if use_data_len:
            in_len = ins[k].to(torch.int64)
            k += 1
        else:
            in_len = torch.full((N,), T, dtype=torch.int64)
        if use_label_len:
            lab_len = ins[k].to(torch.int64)
        else:  # a label ends at its first padding value
            is_pad = label == pad_value
            first = torch.where(is_pad.any(1), is_pad.to(torch.int64).argmax(1),
                                torch.full((N,), label.shape[1], dtype=torch.int64))
            lab_len = first
        targets = label.clamp(min=0)
        loss = F.ctc_loss(torch.log_softmax(data, 2), targets, in_len, lab_len, blank, "none", False)
        return [loss]  # the gradient output is hidden
    return run


def make_kernel(node):
    factory = _KERNELS.get(node.op)
    if factory is None:
        raise NotImplementedError(f"node {node.nid} '{node.name}': operator '{node.raw_op}' is not supported")
    return factory(node, Attrs(node))


# Weight shapes from the data input's shape, for generating random weights (random_params).
def _param_shapes(node, data_shape):
    a = Attrs(node)
    op = node.op
    if op in ("Convolution", "Deconvolution"):
        g = a.int("num_group", 1)
        nf = a.int("num_filter")
        k = tuple(a.tuple("kernel"))
        c = data_shape[1]
        w = (nf, c // g) + k if op == "Convolution" else (c, nf // g) + k
        return {1: w, 2: (nf,)}
    if op == "FullyConnected":
        nh = a.int("num_hidden")
        k = int(np.prod(data_shape[1:])) if a.bool("flatten", True) else data_shape[-1]
        return {1: (nh, k), 2: (nh,)}
    if op == "BatchNorm":
        c = data_shape[a.int("axis", 1) % len(data_shape)]
        return {i: (c,) for i in (1, 2, 3, 4)}
    if op == "LeakyReLU":
        return {1: (data_shape[1],)}
    if op == "Embedding":
        return {1: (a.int("input_dim"), a.int("output_dim"))}
    if op == "UpSampling":
        s = a.int("scale")
        k = 2 * s - s % 2
        return {1: (data_shape[1], 1, k, k)}
    return {}


def _random_array(name, shape, rng):
    """The distributions `weft replay` uses for weights it generates (tools/replay_util.cc)."""
    if name.endswith("moving_var") or name.endswith("running_var"):
        lo, hi = 0.5, 1.5
    elif name.endswith("moving_mean") or name.endswith("running_mean"):
        lo, hi = -0.1, 0.1
    elif name.endswith("gamma"):
        lo, hi = 0.8, 1.2
    elif len(shape) >= 2:
        a = math.sqrt(6.0 / max(int(np.prod(shape[1:])), 1))
        lo, hi = -a, a
    else:
        lo, hi = -0.1, 0.1
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# The module.

class MXNetGraphModule(torch.nn.Module):
    """forward(*inputs) -> tuple of heads. Inputs in the order of `input_names`."""

    def __init__(self, graph, params, input_names):
        super().__init__()
        if not isinstance(graph, SymbolGraph):
            graph = load_graph(graph)
        self.graph = graph
        self.input_names = list(input_names)
        plain = {}
        for key, arr in (params.items() if isinstance(params, dict) else params):
            if arr is not None:  # a "none" record holds no data
                plain[split_param_name(key)[1]] = arr
        labels = graph.label_names()
        var_slot = {}   # nid -> ("input", k) | ("buffer", attr name) | ("label", None)
        missing = []
        for n in graph.variables():
            if n.name in self.input_names:
                var_slot[n.nid] = ("input", self.input_names.index(n.name))
            elif n.name in plain:
                attr = f"w{n.nid}"
                t = torch.from_numpy(np.ascontiguousarray(plain[n.name], dtype=np.float32))
                self.register_buffer(attr, t)
                var_slot[n.nid] = ("buffer", attr)
            elif n.name in labels:
                var_slot[n.nid] = ("label", None)
            else:
                missing.append(n.name)
        for name in self.input_names:
            if graph.find_variable(name) is None:
                raise GraphError(f"input '{name}': the graph has no such variable")
        if missing:
            raise GraphError(f"no array for {len(missing)} variable(s) (neither inputs nor in the params): "
                             + ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else ""))
        self._var_slot = var_slot
        self._steps = _compile(graph)

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise GraphError(f"forward: expected {len(self.input_names)} inputs ({self.input_names}), got {len(inputs)}")
        vals = {}
        for nid, (kind, ref) in self._var_slot.items():
            if kind == "input":
                vals[nid] = [inputs[ref]]
            elif kind == "buffer":
                vals[nid] = [getattr(self, ref)]
            else:
                vals[nid] = [None]
        return _run_steps(self._steps, vals, self.graph.heads)

    def node_outputs(self, *inputs):
        """Every op node's outputs, {nid: [tensors]} (for debugging and per-node comparisons)."""
        vals = {}
        for nid, (kind, ref) in self._var_slot.items():
            vals[nid] = [inputs[ref]] if kind == "input" else [getattr(self, ref)] if kind == "buffer" else [None]
        keep = {}
        _run_steps(self._steps, vals, self.graph.heads, keep=keep)
        return keep


class _Step:
    __slots__ = ("node", "fn", "inputs", "release")

    def __init__(self, node, fn, release):
        self.node = node
        self.fn = fn
        self.inputs = node.inputs
        self.release = release  # nids whose values are dead after this step


def _compile(graph):
    last_use = {}
    for n in graph.nodes:
        for src, _ in n.inputs:
            last_use[src] = n.nid
    head_nids = {nid for nid, _ in graph.heads}
    steps = []
    for n in graph.nodes:
        if n.is_variable:
            continue
        release = [src for src in {s for s, _ in n.inputs}
                   if last_use.get(src) == n.nid and src not in head_nids and not graph.nodes[src].is_variable]
        steps.append(_Step(n, make_kernel(n), release))
    return steps


def _run_steps(steps, vals, heads, on_missing=None, keep=None):
    for st in steps:
        node = st.node
        ins = []
        for pos, (src, idx) in enumerate(st.inputs):
            v = vals[src]
            if v is None or idx >= len(v):
                raise GraphError(f"node {node.nid} '{node.name}' input {pos} refers to output {idx} of node {src}, "
                                 "which does not exist")
            ins.append(v[idx])
        if on_missing is not None:
            on_missing(node, ins, vals)
        try:
            outs = st.fn(ins)
        except (GraphError, NotImplementedError):
            raise
        except RuntimeError as e:
            shapes = [tuple(t.shape) if t is not None else None for t in ins]
            raise GraphError(f"node {node.nid} '{node.name}' ({node.raw_op}) on inputs {shapes}: {e}") from None
        vals[node.nid] = outs
        if keep is not None:
            keep[node.nid] = outs
            continue
        for src in st.release:
            vals[src] = None
    result = []
    for k, (nid, idx) in enumerate(heads):
        v = vals.get(nid)
        if v is None or idx >= len(v):
            raise GraphError(f"head {k} refers to output {idx} of node {nid}, which does not exist")
        result.append(v[idx])
    return tuple(result)


def softmax_input_heads(j):
    """For a decoded symbol JSON: a copy whose heads also list the input of every softmax-like
    head (SoftmaxOutput/Softmax, softmax, SoftmaxActivation), appended after the original heads.

    Random weights often saturate a classifier's softmax into a one-hot vector, which compares
    equal almost whatever came before it; the logits show differences the softmax hides.
    """
    out = json.loads(json.dumps(j))
    heads = out["heads"]
    nodes = out["nodes"]
    extra = []
    for h in heads:
        n = nodes[h[0]]
        if n["op"] in ("SoftmaxOutput", "Softmax", "softmax", "SoftmaxActivation") and n.get("inputs"):
            e = list(n["inputs"][0][:2])
            if e not in [list(x[:2]) for x in heads + extra]:
                extra.append(e + [0] * (len(h) - 2))
    out["heads"] = heads + extra
    return out


def random_params(graph, inputs, seed=0):
    """Weights for every non-input, non-label variable, with weft's distributions.

    `inputs` maps input names to numpy arrays or tensors (their shapes drive the weight shapes).
    Runs the graph once, creating each weight when its consumer needs it. Returns a list of
    ('arg:name' | 'aux:name', float32 array), args first, in node order.
    """
    if not isinstance(graph, SymbolGraph):
        graph = load_graph(graph)
    rng = np.random.default_rng(seed)
    labels = graph.label_names()
    aux = graph.aux_names()
    created = {}
    vals = {}
    for n in graph.variables():
        if n.name in inputs:
            vals[n.nid] = [torch.as_tensor(np.asarray(inputs[n.name], dtype=np.float32))]
        elif n.name in labels:
            vals[n.nid] = [None]
        else:
            vals[n.nid] = None  # created on demand

    def on_missing(node, ins, vals_):
        shapes = None
        for pos, (src, _) in enumerate(node.inputs):
            if ins[pos] is not None or graph.nodes[src].is_variable is False or graph.nodes[src].name in labels:
                continue
            var = graph.nodes[src]
            if shapes is None:
                shapes = _param_shapes(node, tuple(ins[0].shape))
            hint = Attrs(var).tuple("__shape__")
            shape = shapes.get(pos)
            if shape is None and hint and all(d > 0 for d in hint):
                shape = tuple(hint)
            if shape is None:
                raise GraphError(f"random_params: cannot tell the shape of '{var.name}' (input {pos} of node "
                                 f"{node.nid} '{node.name}')")
            arr = _random_array(var.name, shape, rng)
            created[var.name] = arr
            t = torch.from_numpy(arr)
            vals_[src] = [t]
            ins[pos] = t

    # Variables not yet created read as None; _run_steps only indexes them, so give them a
    # placeholder list that on_missing replaces.
    for nid, v in list(vals.items()):
        if v is None:
            vals[nid] = [None]
    with torch.no_grad():
        _run_steps(_compile(graph), vals, graph.heads, on_missing)
    args = [(f"arg:{n.name}", created[n.name]) for n in graph.variables() if n.name in created and n.name not in aux]
    auxs = [(f"aux:{n.name}", created[n.name]) for n in graph.variables() if n.name in created and n.name in aux]
    return args + auxs


def _main(argv):
    import argparse
    p = argparse.ArgumentParser(description="Tools around the PyTorch peer of `weft replay`.")
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("logits-graph", help="write GRAPH with the inputs of its softmax heads added as heads")
    q.add_argument("graph")
    q.add_argument("out")
    q = sub.add_parser("random-params", help="write a .params file of random weights (weft's distributions)")
    q.add_argument("graph")
    q.add_argument("out")
    q.add_argument("--input", action="append", required=True, help="NAME=SHAPE, e.g. data=1x3x224x224")
    q.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.cmd == "logits-graph":
        with open(args.graph, "r", encoding="utf-8") as f:
            j = json.load(f)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(softmax_input_heads(j), f)
        return 0
    inputs = {}
    for spec in args.input:
        name, shape = spec.split("=", 1)
        inputs[name] = np.zeros([int(d) for d in shape.replace(",", "x").split("x")], np.float32)
    save_params(args.out, random_params(load_graph(args.graph), inputs, args.seed))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))
