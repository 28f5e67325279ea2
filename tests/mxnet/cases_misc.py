"""Cases for the softmax family and loss layers (SoftmaxOutput, regression outputs, CTCLoss), the
fused RNN, the creation and random operators, the optimizer updates, pick and one_hot."""
from __future__ import annotations

import numpy as np

from cases_common import tup


def add_softmax(b):
    for shape, axis, temp in (((3, 5), -1, None), ((2, 4, 3), 1, None), ((2, 3, 4), 0, 2.5),
                              ((4, 6), -1, 0.5), ((2, 3, 2, 2), 1, None)):
        attrs = {"axis": axis}
        if temp is not None:
            attrs["temperature"] = temp
        for op in ("softmax", "log_softmax"):
            b.add(op, f"{shape},axis={axis},T={temp}", [b.u(*shape, low=-3, high=3)], attrs)
    b.add("softmax", "default_axis", [b.u(2, 3, 4)])
    b.add("softmax", "dtype_float64", [b.u(3, 4)], {"dtype": "float64"})
    length = np.array([2, 5, 1], dtype=np.int32)
    b.add("softmax", "use_length", [b.u(3, 5), length], {"axis": -1, "use_length": True}, grad=[0])
    for shape in ((3, 5), (2, 3, 4), (2, 3, 2, 2)):
        b.add("SoftmaxActivation", f"instance{shape}", [b.u(*shape, low=-3, high=3)],
              expected="E8: for data of more than 2 dims MXNet's instance-mode gradient is the softmax "
                       "gradient along axis 1, its forward is along the last axis",
              expected_arrays=("grad0",))
    for shape in ((2, 3, 4, 4), (2, 4, 5)):
        b.add("SoftmaxActivation", f"channel{shape}", [b.u(*shape, low=-3, high=3)], {"mode": "channel"})


def labels(b, shape, classes, ignore=None, fraction=0.0):
    lab = b.rng.integers(0, classes, size=shape).astype(np.float32)
    if ignore is not None:
        lab = np.where(b.rng.uniform(size=shape) < fraction, np.float32(ignore), lab).astype(np.float32)
    return lab


def add_softmax_output(b):
    n, k = 4, 5
    x = b.u(n, k, low=-3, high=3)
    lab = labels(b, (n,), k)
    for norm in ("null", "batch", "valid"):
        b.add("SoftmaxOutput", f"2d,norm={norm}", [x, lab], {"normalization": norm}, grad=[0])
    b.add("SoftmaxOutput", "grad_scale", [x, lab], {"grad_scale": 0.7}, grad=[0])
    lab_ig = labels(b, (n,), k, ignore=1, fraction=0.4)
    lab_ig[0] = 1.0
    for norm in ("null", "valid"):
        b.add("SoftmaxOutput", f"use_ignore,norm={norm}", [x, lab_ig],
              {"use_ignore": True, "ignore_label": 1, "normalization": norm}, grad=[0])
    b.add("SoftmaxOutput", "ignore_off", [x, lab_ig], {"ignore_label": 1}, grad=[0])
    xm = b.u(2, 3, 4, 5, low=-3, high=3)
    labm = labels(b, (2, 4, 5), 3, ignore=0, fraction=0.3)
    for norm in ("null", "batch", "valid"):
        b.add("SoftmaxOutput", f"multi_output,norm={norm}", [xm, labm],
              {"multi_output": True, "normalization": norm, "use_ignore": norm == "valid", "ignore_label": 0},
              grad=[0])
    xp = b.u(2, 3, 4, low=-3, high=3)
    b.add("SoftmaxOutput", "preserve_shape", [xp, labels(b, (2, 3), 4)], {"preserve_shape": True}, grad=[0])
    # default mode on 3-d data: the softmax is over all non-batch elements and only label[i] of row
    # i is read; weft takes the (N,) label of OPS.md, MXNet insists on data.shape[:-1] (its
    # InferShape) and reads the first N values of it, so MXNet gets (N, d1) with those values first
    lab3 = labels(b, (2,), 12)

    def mx_label_3d(data, label, **attrs):
        import mxnet as mx
        full = np.concatenate([label.asnumpy(), np.zeros(2 * 3 - 2, np.float32)]).reshape(2, 3)
        return mx.nd.SoftmaxOutput(data, mx.nd.array(full), **attrs)

    b.add("SoftmaxOutput", "3d_default", [xp, lab3], {}, grad=[0], mx_call=mx_label_3d)
    probs = b.u(n, k, low=0, high=1)
    b.add("SoftmaxOutput", "probability_label", [x, probs / probs.sum(1, keepdims=True)],
          {"grad_scale": 1.5}, grad=[0])
    b.add("SoftmaxOutput", "out_grad", [x, lab], {"out_grad": True}, grad=[0],
          expected="E9: with out_grad=True MXNet multiplies the gradient by the output, not by the "
                   "head gradient", expected_arrays=("grad0",))
    b.add("SoftmaxOutput", "smooth_alpha", [x, lab], {"smooth_alpha": 0.1}, grad=[0])
    b.add("Softmax", "alias", [x, lab], {}, grad=[0])
    for op in ("LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"):
        d = b.away(4, 3)
        b.add(op, "2d", [d, b.u(4, 3)], {}, grad=[0])
        b.add(op, "grad_scale", [b.away(3, 2, 2), b.u(3, 2, 2)], {"grad_scale": 2.5}, grad=[0])
        b.add(op, "vector_label", [b.away(5, 1), b.u(5)], {}, grad=[0])


def add_ctc(b):
    t, n, a, lmax = 12, 3, 6, 4
    for blank in ("first", "last"):
        for use_data, use_label in ((False, False), (True, False), (False, True), (True, True)):
            data = b.u(t, n, a, low=-2, high=2)
            lo, hi = (1, a) if blank == "first" else (0, a - 1)
            pad = 0 if blank == "first" else -1
            lab = b.rng.integers(lo, hi, size=(n, lmax)).astype(np.float32)
            lab_len = np.array([4, 2, 3], dtype=np.float32)
            if not use_label:  # lengths come from the padding value
                for i in range(n):
                    lab[i, int(lab_len[i]):] = pad
            else:  # the padding can be anything: lengths decide
                for i in range(n):
                    lab[i, int(lab_len[i]):] = lo
            inputs = [data, lab]
            if use_data:
                inputs.append(np.array([12, 9, 7], dtype=np.float32))
            if use_label:
                inputs.append(lab_len)
            b.add("_contrib_CTCLoss", f"blank={blank},data_len={use_data},label_len={use_label}", inputs,
                  {"blank_label": blank, "use_data_lengths": use_data, "use_label_lengths": use_label}, grad=[0])
    data = b.u(5, 2, 4)
    lab = np.array([[1, 1, 2], [3, 0, 0]], dtype=np.float32)  # repeated symbols need a blank between
    b.add("CTCLoss", "repeats", [data, lab], {}, grad=[0])


def rnn_param_size(mode, inp, h, layers, bidir):
    g = {"lstm": 4, "gru": 3, "rnn_relu": 1, "rnn_tanh": 1}[mode]
    d = 2 if bidir else 1
    size = (inp + h + 2) * g * h * d
    size += (layers - 1) * (d * h + h + 2) * g * h * d
    return size


def rnn_per_sequence_call(mode, layers, bidir, h):
    """MXNet's RNN with per-sequence lengths, run sequence by sequence on its valid steps (outputs
    past the length are zeros, final states taken at the length). MXNet 1.9.1's CPU RNN accepts
    use_sequence_length but ignores the lengths (E13), so this composes the reference from MXNet
    calls that it does run; autograd differentiates through the slices and the concatenation."""
    def call(*inputs, **attrs):
        import mxnet as mx
        data, params, state = inputs[0], inputs[1], inputs[2]
        cell = inputs[3] if mode == "lstm" else None
        lengths = [int(v) for v in inputs[-1].asnumpy()]
        t = data.shape[0]
        base = {k: v for k, v in attrs.items() if k != "use_sequence_length"}
        outs, hs, cs = [], [], []
        for n, length in enumerate(lengths):
            args = [data[:length, n:n + 1], params, state[:, n:n + 1]]
            if cell is not None:
                args.append(cell[:, n:n + 1])
            r = mx.nd.RNN(*args, **base)
            y = r[0]
            if length < t:
                y = mx.nd.concat(y, mx.nd.zeros((t - length, 1, y.shape[2])), dim=0)
            outs.append(y)
            hs.append(r[1])
            if cell is not None:
                cs.append(r[2])
        result = [mx.nd.concat(*outs, dim=1), mx.nd.concat(*hs, dim=1)]
        if cell is not None:
            result.append(mx.nd.concat(*cs, dim=1))
        return result
    return call


def lstm_clip_call(h, lo, hi):
    """A one-layer LSTM written with MXNet ops, the cell state clipped to [lo, hi] after each
    update and before h = o * tanh(c) (cuDNN's cudnnRNNSetClip, which MXNet uses on GPU). MXNet
    1.9.1's CPU RNN accepts lstm_state_clip_* but ignores them (E13)."""
    def call(data, params, state, cell, **attrs):
        import mxnet as mx
        i_size = data.shape[2]
        g = 4 * h
        w_ih = params[:g * i_size].reshape((g, i_size))
        w_hh = params[g * i_size:g * (i_size + h)].reshape((g, h))
        b_ih = params[g * (i_size + h):g * (i_size + h) + g]
        b_hh = params[g * (i_size + h) + g:]
        hx, cx = state[0], cell[0]
        ys = []
        for step in range(data.shape[0]):
            z = mx.nd.FullyConnected(data[step], w_ih, b_ih, num_hidden=g) + \
                mx.nd.FullyConnected(hx, w_hh, b_hh, num_hidden=g)
            zi, zf, zg, zo = mx.nd.split(z, num_outputs=4, axis=1)
            cx = mx.nd.clip(mx.nd.sigmoid(zf) * cx + mx.nd.sigmoid(zi) * mx.nd.tanh(zg), lo, hi)
            hx = mx.nd.sigmoid(zo) * mx.nd.tanh(cx)
            ys.append(mx.nd.expand_dims(hx, axis=0))
        return [mx.nd.concat(*ys, dim=0), mx.nd.expand_dims(hx, 0), mx.nd.expand_dims(cx, 0)]
    return call


def add_rnn(b):
    configs = [("lstm", 1, False, True), ("lstm", 2, True, True), ("gru", 1, False, False), ("gru", 2, True, True),
               ("rnn_relu", 1, False, True), ("rnn_tanh", 2, True, False), ("rnn_tanh", 1, False, True),
               ("lstm", 1, True, False)]
    for mode, layers, bidir, state_outputs in configs:
        t, n, i, h = 5, 3, 4, 6
        d = 2 if bidir else 1
        params = b.u(rnn_param_size(mode, i, h, layers, bidir), low=-0.4, high=0.4)
        inputs = [b.u(t, n, i, low=-1, high=1), params, b.u(layers * d, n, h, low=-.5, high=.5)]
        if mode == "lstm":
            inputs.append(b.u(layers * d, n, h, low=-.5, high=.5))
        attrs = {"mode": mode, "state_size": h, "num_layers": layers, "bidirectional": bidir,
                 "state_outputs": state_outputs}
        b.add("RNN", f"{mode},L={layers},bidir={bidir},states={state_outputs}", inputs, attrs, is_train=True)
    inputs = [b.u(4, 2, 3), b.u(rnn_param_size("gru", 3, 5, 1, False), low=-.4, high=.4), b.u(1, 2, 5)]
    b.add("RNN", "gru_inference", inputs, {"mode": "gru", "state_size": 5, "num_layers": 1}, backward=False)
    # per-sequence lengths (the sequence_length input is the last one)
    for mode, layers, bidir in (("rnn_tanh", 1, False), ("lstm", 1, True), ("gru", 2, False), ("lstm", 2, True)):
        t, n, i, h = 5, 3, 3, 4
        d = 2 if bidir else 1
        inputs = [b.u(t, n, i, low=-1, high=1), b.u(rnn_param_size(mode, i, h, layers, bidir), low=-.4, high=.4),
                  b.u(layers * d, n, h, low=-.5, high=.5)]
        if mode == "lstm":
            inputs.append(b.u(layers * d, n, h, low=-.5, high=.5))
        inputs.append(np.array([5, 3, 1], dtype=np.float32))
        b.add("RNN", f"{mode},L={layers},bidir={bidir},sequence_length", inputs,
              {"mode": mode, "state_size": h, "num_layers": layers, "bidirectional": bidir, "state_outputs": True,
               "use_sequence_length": True}, grad=list(range(len(inputs) - 1)), is_train=True,
              mx_call=rnn_per_sequence_call(mode, layers, bidir, h))
    # LSTM cell-state clipping
    t, n, i, h = 6, 2, 3, 4
    inputs = [b.u(t, n, i, low=-2, high=2), b.u(rnn_param_size("lstm", i, h, 1, False), low=-.8, high=.8),
              b.u(1, n, h), b.u(1, n, h)]
    b.add("RNN", "lstm_state_clip", inputs,
          {"mode": "lstm", "state_size": h, "num_layers": 1, "state_outputs": True,
           "lstm_state_clip_min": -0.3, "lstm_state_clip_max": 0.4}, is_train=True,
          mx_call=lstm_clip_call(h, -0.3, 0.4))


def random_statistics(kind, a, c, shape):
    def check(case, outs, grads):
        y = outs[0]
        if tuple(y.shape) != tuple(shape):
            return f"shape {y.shape}, expected {shape}"
        if kind == "uniform":
            if y.min() < a or y.max() >= c:
                return f"values outside [{a}, {c})"
            mean, std = (a + c) / 2, (c - a) / np.sqrt(12)
        else:
            mean, std = a, c
        se = std / np.sqrt(y.size)
        if abs(y.mean() - mean) > 6 * se or abs(y.std() - std) > 0.05 * std:
            return f"mean {y.mean():.4f} std {y.std():.4f}, expected {mean:.4f} and {std:.4f}"
        return ""
    return check


def add_creation(b):
    for op, attrs in (("_zeros", {"shape": "(2, 3)"}), ("_ones", {"shape": "(4,)"}),
                      ("_full", {"shape": "(2, 2, 3)", "value": 1.25}), ("_zeros", {"shape": "(3, 2)", "dtype": "float64"}),
                      ("_arange", {"start": 2, "stop": 11, "step": 1.5}), ("_arange", {"start": 5}),
                      ("_arange", {"start": 0, "stop": 3, "repeat": 2}), ("_arange", {"start": 1, "stop": -2, "step": -0.5})):
        b.add(op, ",".join(f"{k}={v}" for k, v in attrs.items()), [], attrs)
    shape = (200, 100)
    b.add("_random_uniform", "statistics", [], {"low": -1.0, "high": 3.0, "shape": tup(shape)},
          skip_compare=("out0",), check=random_statistics("uniform", -1.0, 3.0, shape))
    b.add("_random_normal", "statistics", [], {"loc": 0.5, "scale": 2.0, "shape": tup(shape)},
          skip_compare=("out0",), check=random_statistics("normal", 0.5, 2.0, shape))


def adamw_call(weight, grad, mean, var, **attrs):
    """MXNet 1.9.1's contrib adamw_update takes rescale_grad as a (1,) array input; weft's
    adamw_update takes it as a scalar parameter."""
    import mxnet as mx
    rescale = float(attrs.pop("rescale_grad", 1.0))
    return mx.nd.contrib.adamw_update(weight, grad, mean, var, mx.nd.array([rescale]), **attrs)


def add_optimizers(b):
    # One step each, from non-zero states (a later step's situation); the states are updated in
    # place by both libraries and compared after the call (dump). Gradients in [-2, 2]: with
    # rescale_grad 1.5 and clip_gradient 0.7 most of them are clipped.
    shape = (4, 6)
    scaled = {"wd": 0.05, "rescale_grad": 1.5, "clip_gradient": 0.7}
    for name, attrs in (("plain", {"lr": 0.1}), ("wd_rescale_clip", {"lr": 0.05, **scaled}),
                        ("clip_zero", {"lr": 0.1, "wd": 0.2, "clip_gradient": 0}),
                        ("lazy_update", {"lr": 0.1, "lazy_update": False})):
        b.add("sgd_update", name, [b.u(*shape), b.u(*shape)], attrs, backward=False)
    for name, attrs in (("plain", {"lr": 0.1, "momentum": 0.9}),
                        ("wd_rescale_clip", {"lr": 0.05, "momentum": 0.8, **scaled}),
                        ("no_momentum", {"lr": 0.1})):
        b.add("sgd_mom_update", name, [b.u(*shape), b.u(*shape), b.u(*shape, low=-0.5, high=0.5)],
              attrs, backward=False, dump=[2])
    for name, attrs in (("plain", {"lr": 0.01}),
                        ("wd_rescale_clip", {"lr": 0.02, "beta1": 0.85, "beta2": 0.99, "epsilon": 1e-6,
                                             **scaled})):
        inputs = [b.u(*shape), b.u(*shape), b.u(*shape, low=-0.5, high=0.5), b.u(*shape, low=0.0, high=0.5)]
        b.add("adam_update", name, inputs, attrs, backward=False, dump=[2, 3])
        b.add("adamw_update", name, inputs, {"eta": 0.6, **attrs}, backward=False, dump=[2, 3],
              mx_call=adamw_call)


def pick_index(b, shape, n):
    """Index values in [-2n, 2n), some fractional, for clip and wrap alike."""
    idx = b.rng.integers(-2 * n, 2 * n, size=shape).astype(np.float32)
    return np.where(b.rng.uniform(size=shape) < 0.3, idx + np.float32(0.5), idx).astype(np.float32)


def add_pick(b):
    x = b.u(3, 4, 5)
    for axis in (0, 1, 2, -1, -2):
        for keepdims in (False, True):
            for mode in ("clip", "wrap"):
                shape = list(x.shape)
                n = shape[axis]
                if keepdims:
                    shape[axis] = 1
                else:
                    del shape[axis]
                b.add("pick", f"axis={axis},keepdims={keepdims},{mode}", [x, pick_index(b, tuple(shape), n)],
                      {"axis": axis, "keepdims": keepdims, "mode": mode}, grad=[0])
    labels = b.rng.integers(0, 6, size=(5,)).astype(np.int32)
    b.add("pick", "default_int32_index", [b.u(5, 6), labels], {}, grad=[0])
    b.add("pick", "1d", [b.u(7), np.array([3.0], np.float32)], {"axis": 0}, grad=[0])
    # MXNet 1.9.1 rejects axis=None ("not supported by pick yet"); weft picks from the flattened
    # data, checked against numpy
    flat = b.u(3, 4)
    b.add("pick", "axis_None", [flat, np.array([7.0], np.float32)], {"axis": "None"}, backward=False,
          reference=lambda inputs: [inputs[0].reshape(-1)[[7]]])


def add_one_hot(b):
    # negative, out-of-range and fractional indices (truncated toward zero)
    idx = np.array([[0, -1, 3], [4, 2.7, -0.5]], np.float32)
    b.add("one_hot", "out_of_range", [idx], {"depth": 4}, backward=False)
    b.add("one_hot", "on_off", [idx], {"depth": 5, "on_value": 2.5, "off_value": -1}, backward=False)
    b.add("one_hot", "int32_out", [b.rng.integers(-2, 8, size=(6,)).astype(np.int32)],
          {"depth": 6, "dtype": "int32"}, backward=False)
    b.add("one_hot", "float64_out", [b.rng.integers(0, 3, size=(2, 2, 3)).astype(np.float32)],
          {"depth": 3, "dtype": "float64"}, backward=False)


def add_cases(b):
    add_softmax(b)
    add_softmax_output(b)
    add_ctc(b)
    add_rnn(b)
    add_creation(b)
    # Appended last: every case draws from the shared generator, so cases added before others
    # would change those cases' inputs.
    add_optimizers(b)
    add_pick(b)
    add_one_hot(b)
