"""Cases for neural-network layers: Convolution, Deconvolution, FullyConnected, Pooling,
BatchNorm, LayerNorm, LRN, Dropout, UpSampling, Embedding."""
from __future__ import annotations

import numpy as np

from cases_common import tup


def out_size(x, k, s, p, d):
    return (x + 2 * p - d * (k - 1) - 1) // s + 1


def add_convolution(b):
    fixed = [  # (spatial input, kernel, stride, pad, dilate, groups, c_in/group, filters/group, no_bias)
        ((9,), (3,), (1,), (1,), (1,), 1, 3, 4, False),
        ((12,), (5,), (2,), (2,), (2,), 2, 2, 3, True),
        ((8, 8), (3, 3), (1, 1), (1, 1), (1, 1), 1, 3, 4, False),
        ((9, 7), (3, 2), (2, 1), (1, 0), (1, 1), 1, 2, 5, False),
        ((10, 10), (3, 3), (1, 1), (2, 2), (2, 2), 1, 2, 3, True),
        ((8, 8), (3, 3), (2, 2), (1, 1), (1, 1), 4, 1, 1, False),  # depthwise
        ((7, 7), (1, 1), (1, 1), (0, 0), (1, 1), 3, 2, 2, True),
        ((6, 9), (1, 7), (1, 1), (0, 3), (1, 1), 1, 3, 2, False),
        ((5, 5, 5), (3, 3, 3), (1, 2, 1), (1, 1, 0), (1, 1, 1), 1, 2, 3, False),
    ]
    configs = list(fixed)
    for _ in range(6):  # random 2-D geometries
        k = (b.pick([1, 2, 3, 5]), b.pick([1, 2, 3]))
        s = (b.pick([1, 2, 3]), b.pick([1, 2]))
        p = (b.pick([0, 1, 2]), b.pick([0, 1]))
        d = (b.pick([1, 2]), b.pick([1, 1, 3]))
        g = b.pick([1, 1, 2, 3])
        x = (int(b.rng.integers(6, 12)), int(b.rng.integers(5, 11)))
        if any(out_size(x[i], k[i], s[i], p[i], d[i]) < 1 for i in range(2)):
            continue
        configs.append((x, k, s, p, d, g, b.pick([1, 2, 3]), b.pick([1, 2, 4]), b.pick([False, True])))
    for x, k, s, p, d, g, cg, fg, no_bias in configs:
        c, f = cg * g, fg * g
        data = b.u(2, c, *x)
        weight = b.u(f, cg, *k, low=-0.5, high=0.5)
        inputs = [data, weight] + ([] if no_bias else [b.u(f)])
        attrs = {"kernel": tup(k), "stride": tup(s), "pad": tup(p), "dilate": tup(d), "num_filter": f,
                 "num_group": g, "no_bias": no_bias}
        name = f"x{tup(x)}k{tup(k)}s{tup(s)}p{tup(p)}d{tup(d)}g{g}f{f}{'nb' if no_bias else ''}"
        b.add("Convolution", name, inputs, attrs)
    # defaults: stride/pad/dilate omitted
    b.add("Convolution", "defaults", [b.u(1, 2, 5, 5), b.u(3, 2, 3, 3, low=-.5, high=.5), b.u(3)],
          {"kernel": "(3, 3)", "num_filter": 3})


def deconv_target_shape_call(x, k, s, target):
    """MXNet's Deconvolution with target_shape replaced by the pad and adj that its InferPad
    derives (deconvolution-inl.h): total = s*(x-1) + k - target, adj = total % 2,
    pad = (total + 1) / 2. MXNet 1.9.1's oneDNN path fails on target_shape itself ("could not create
    a descriptor for a dilated deconvolution"), docs/MXNET.md."""
    totals = [s[i] * (x[i] - 1) + k[i] - target[i] for i in range(len(x))]
    pad = tup((t + 1) // 2 for t in totals)
    adj = tup(t % 2 for t in totals)

    def call(*inputs, **attrs):
        import mxnet as mx
        attrs = dict(attrs, pad=pad, adj=adj)
        del attrs["target_shape"]
        return mx.nd.Deconvolution(*inputs, **attrs)
    return call


def add_deconvolution(b):
    configs = [  # (x, kernel, stride, pad, adj, groups, c/group, f/group, no_bias, target_shape)
        ((5, 5), (3, 3), (2, 2), (1, 1), (1, 1), 1, 3, 2, True, None),
        ((4, 6), (4, 4), (2, 2), (1, 1), (0, 0), 1, 2, 3, False, None),
        ((4, 4), (3, 3), (1, 1), (0, 0), (0, 0), 2, 2, 2, True, None),
        ((4, 4), (4, 4), (2, 2), (0, 0), (0, 0), 1, 2, 2, True, (8, 8)),
        ((3, 5), (3, 3), (2, 2), (0, 0), (0, 0), 1, 2, 3, False, (6, 9)),
        ((7,), (3,), (2,), (1,), (1,), 1, 2, 3, False, None),
    ]
    for x, k, s, p, a, g, cg, fg, no_bias, target in configs:
        c, f = cg * g, fg * g
        inputs = [b.u(2, c, *x), b.u(c, fg, *k, low=-.5, high=.5)] + ([] if no_bias else [b.u(f)])
        attrs = {"kernel": tup(k), "stride": tup(s), "pad": tup(p), "adj": tup(a), "num_filter": f,
                 "num_group": g, "no_bias": no_bias}
        mx_call = None
        if target is not None:
            attrs["target_shape"] = tup(target)
            mx_call = deconv_target_shape_call(x, k, s, target)
        b.add("Deconvolution", f"x{tup(x)}k{tup(k)}s{tup(s)}p{tup(p)}a{tup(a)}g{g}"
              f"{'nb' if no_bias else ''}{'t' if target else ''}", inputs, attrs, mx_call=mx_call)


def add_fully_connected(b):
    for shape, hidden, flatten, no_bias in (((4, 7), 5, True, False), ((3, 2, 3, 4), 6, True, False),
                                             ((3, 2, 5), 4, False, False), ((2, 3, 4, 6), 3, False, True),
                                             ((5, 9), 8, True, True), ((6, 3, 2), 7, True, True)):
        k = shape[-1] if not flatten else int(np.prod(shape[1:]))
        inputs = [b.u(*shape), b.u(hidden, k, low=-.5, high=.5)] + ([] if no_bias else [b.u(hidden)])
        b.add("FullyConnected", f"{shape},h={hidden},flatten={flatten},no_bias={no_bias}", inputs,
              {"num_hidden": hidden, "flatten": flatten, "no_bias": no_bias})


FULL_POOL_NOTE = ("E6: MXNet's avg/sum pooling gradient divides by the whole kernel area where its "
                  "forward divided a clipped last window (pooling_convention=full)")


def pool_same_reference(x, k, s):
    w = x.shape[-1]
    out = -(-w // s)
    return np.stack([x[..., i * s:min(i * s + k, w)].max(axis=-1) for i in range(out)], axis=-1)


def add_pooling(b):
    configs = [  # (data shape, attrs)
        ((2, 3, 8, 8), {"kernel": "(2, 2)", "stride": "(2, 2)"}),
        ((2, 3, 7, 7), {"kernel": "(3, 3)", "stride": "(2, 2)", "pooling_convention": "full"}),
        ((2, 2, 9, 8), {"kernel": "(3, 3)", "stride": "(2, 2)", "pad": "(1, 1)"}),
        ((2, 2, 9, 8), {"kernel": "(3, 3)", "stride": "(2, 2)", "pad": "(1, 1)", "pooling_convention": "full"}),
        ((1, 3, 6, 7), {"kernel": "(3, 2)", "stride": "(1, 2)", "pad": "(1, 0)"}),
        ((2, 4, 5, 5), {"kernel": "(7, 7)", "global_pool": True}),
        ((2, 3, 10), {"kernel": "(3,)", "stride": "(2,)", "pad": "(1,)"}),
        ((2, 2, 4, 5, 6), {"kernel": "(2, 2, 3)", "stride": "(2, 1, 2)", "pad": "(0, 1, 1)"}),
        ((1, 2, 6, 6), {"kernel": "(3, 3)", "stride": "(3, 3)", "pad": "(2, 2)", "pooling_convention": "full"}),
    ]
    # Pooling runs in training mode: MXNet's max-pooling gradient is wrong after a predict-mode
    # forward (E5, the case after the loop)
    for shape, attrs in configs:
        full = attrs.get("pooling_convention") == "full"
        for pool_type in ("max", "avg", "sum"):
            a = dict(attrs, pool_type=pool_type)
            b.add("Pooling", f"{pool_type}{shape}" + "".join(f",{k}={v}" for k, v in attrs.items()),
                  [b.distinct(*shape)], a, is_train=True,
                  expected=FULL_POOL_NOTE if full and pool_type == "avg" else None, expected_arrays=("grad0",))
        if "pad" in attrs:
            b.add("Pooling", f"avg_exclude_pad{shape}" + "".join(f",{k}={v}" for k, v in attrs.items()),
                  [b.u(*shape)], dict(attrs, pool_type="avg", count_include_pad=False), is_train=True,
                  expected=FULL_POOL_NOTE if full else None, expected_arrays=("grad0",))
    b.add("Pooling", "max_predict_mode_backward", [b.distinct(2, 3, 8, 8)],
          {"kernel": "(2, 2)", "stride": "(2, 2)", "pool_type": "max"}, is_train=False,
          expected="E5: MXNet's oneDNN max pooling keeps no workspace in a predict-mode forward, "
                   "and its backward then routes gradients to the wrong window elements",
          expected_arrays=("grad0",))
    # 'same' (1-D max): MXNet 1.9.1 rejects every such call on CPU (its shape check reads pad[1]
    # and pad[2] of a 1-d pad), so the reference is numpy: windows [i*s, min(i*s+k, W)), ceil(W/s)
    # outputs (MXNet's pool.h with pad 0)
    for w, k, s_ in ((11, 3, 2), (10, 4, 3), (7, 2, 1)):
        b.add("Pooling", f"max_same_1d_w{w}k{k}s{s_}", [b.distinct(2, 3, w)],
              {"kernel": f"({k},)", "stride": f"({s_},)", "pool_type": "max", "pooling_convention": "same"},
              backward=False, reference=lambda inputs, k=k, s_=s_: [pool_same_reference(inputs[0], k, s_)])
    for pv in (1, 2, 3):
        b.add("Pooling", f"lp_p{pv}", [b.u(2, 3, 6, 6)],
              {"kernel": "(2, 2)", "stride": "(2, 2)", "pool_type": "lp", "p_value": pv}, is_train=True)
    b.add("Pooling", "lp_p2_pad", [b.u(1, 2, 5, 5)],
          {"kernel": "(3, 3)", "stride": "(2, 2)", "pad": "(1, 1)", "pool_type": "lp", "p_value": 2},
          is_train=True)
    b.add("Pooling", "global_avg_1d", [b.u(2, 3, 7)], {"kernel": "(1,)", "global_pool": True, "pool_type": "avg"},
          is_train=True)
    b.add("Pooling", "global_max_3d", [b.distinct(1, 2, 3, 4, 5)],
          {"kernel": "(1, 1, 1)", "global_pool": True, "pool_type": "max"}, is_train=True)


def add_batch_norm(b):
    for shape, axis in (((4, 3, 5, 5), 1), ((6, 4), 1), ((3, 4, 5), -1), ((2, 3, 4, 2), 2)):
        c = shape[axis]
        for is_train in (True, False):
            for fix_gamma, use_global in ((True, False), (False, False), (False, True)):
                inputs = [b.u(*shape, low=-1, high=3), b.u(c, low=0.5, high=1.5), b.u(c), b.u(c),
                          b.u(c, low=0.5, high=2.0)]
                attrs = {"fix_gamma": fix_gamma, "use_global_stats": use_global, "axis": axis,
                         "eps": b.pick(["1e-3", "1e-5", "2e-5"]), "momentum": b.pick(["0.9", "0.7"])}
                b.add("BatchNorm", f"{shape},axis={axis},train={is_train},fix_gamma={fix_gamma},"
                      f"global={use_global}", inputs, attrs, grad=[0, 1, 2], is_train=is_train,
                      dump=[3, 4])
        b.add("BatchNorm", f"{shape},axis={axis},forward_train", [b.u(*shape), b.u(c), b.u(c), b.u(c),
              b.u(c, low=.5, high=2)], {"axis": axis, "fix_gamma": False}, is_train=True, backward=False)
    b.add("BatchNorm", "defaults_infer", [b.u(2, 3, 4), b.u(3), b.u(3), b.u(3), b.u(3, low=.5, high=2)],
          backward=False)
    b.add("BatchNorm", "output_mean_var_train", [b.u(4, 3, 2, 2), b.u(3), b.u(3), b.u(3), b.u(3, low=.5, high=2)],
          {"output_mean_var": True, "fix_gamma": False}, is_train=True, backward=False,
          expected="E10: with output_mean_var the third output is the variance in weft, the inverse "
                   "standard deviation in MXNet's CPU kernel", expected_arrays=("out2",))


def add_layer_norm(b):
    for shape, axis in (((4, 6), -1), ((2, 3, 5), -1), ((2, 4, 3), 1), ((3, 5, 2, 2), 1)):
        c = shape[axis]
        b.add("LayerNorm", f"{shape},axis={axis}", [b.u(*shape), b.u(c, low=.5, high=1.5), b.u(c)],
              {"axis": axis, "eps": b.pick(["1e-5", "1e-3"])})


def add_lrn(b):
    for nsize, alpha, beta, knorm in ((5, 1e-4, 0.75, 2.0), (3, 0.1, 0.5, 1.0), (1, 0.01, 1.0, 1.5)):
        b.add("LRN", f"n={nsize},a={alpha},b={beta},k={knorm}", [b.u(2, 6, 4, 4)],
              {"nsize": nsize, "alpha": alpha, "beta": beta, "knorm": knorm})


def dropout_statistics(p, axes=()):
    """weft alone (the masks of two generators cannot match): the dropped fraction is p within
    0.05, kept values are x / (1 - p), the mask is shared along `axes`, and the gradient is
    head_grad * mask / (1 - p)."""
    def check(case, outs, grads):
        x, y, hg = case.inputs[0], outs[0], case.head_grads[0]
        kept = y != 0
        for axis in axes:
            if not np.all(kept == np.take(kept, [0], axis=axis)):
                return f"mask is not shared along axis {axis}"
        frac = 1.0 - kept.mean()
        if abs(frac - p) > 0.05:
            return f"dropped fraction {frac:.3f}, expected {p}"
        scale = 1.0 / (1.0 - p)
        if not np.allclose(y[kept], x[kept] * scale, rtol=1e-6, atol=1e-6):
            return "kept values are not x / (1 - p)"
        if grads and not np.allclose(grads[0], np.where(kept, hg * scale, 0.0), rtol=1e-6, atol=1e-6):
            return "gradient is not head_grad * mask / (1 - p)"
        return ""
    return check


def add_dropout(b):
    b.add("Dropout", "p=0_train", [b.u(3, 4, 5)], {"p": 0.0}, is_train=True)
    b.add("Dropout", "p=0.5_infer", [b.u(3, 4, 5)], {"p": 0.5})
    b.add("Dropout", "always_p=0", [b.u(3, 4)], {"p": 0.0, "mode": "always"})
    for p in (0.3, 0.5):
        b.add("Dropout", f"mask_statistics_p={p}", [b.away(40, 50)], {"p": p}, is_train=True,
              skip_compare=("out0", "grad0"), check=dropout_statistics(p))
    b.add("Dropout", "mask_statistics_axes", [b.away(30, 40, 6)], {"p": 0.4, "axes": "(2,)"}, is_train=True,
          skip_compare=("out0", "grad0"), check=dropout_statistics(0.4, axes=(2,)))
    b.add("Dropout", "axes_p=0_train", [b.u(3, 4, 5)], {"p": 0.0, "axes": "(0, 2)"}, is_train=True)


def add_upsampling(b):
    b.add("UpSampling", "nearest_x2", [b.u(2, 3, 4, 5)], {"scale": 2, "sample_type": "nearest", "num_args": 1})
    b.add("UpSampling", "nearest_x3", [b.u(1, 2, 3, 3)], {"scale": 3, "sample_type": "nearest", "num_args": 1})
    b.add("UpSampling", "nearest_concat", [b.u(2, 2, 4, 4), b.u(2, 3, 2, 2)],
          {"scale": 2, "sample_type": "nearest", "num_args": 2})
    b.add("UpSampling", "nearest_sum", [b.u(2, 3, 4, 4), b.u(2, 3, 8, 8), b.u(2, 3, 2, 2)],
          {"scale": 2, "sample_type": "nearest", "num_args": 3, "multi_input_mode": "sum"})
    for scale in (2, 3):
        k = 2 * scale - scale % 2
        b.add("UpSampling", f"bilinear_x{scale}", [b.u(2, 3, 4, 4), b.u(3, 1, k, k, low=0, high=1)],
              {"scale": scale, "sample_type": "bilinear", "num_args": 2, "num_filter": 3})


def add_embedding(b):
    idx = b.rng.integers(0, 10, size=(3, 4)).astype(np.float32)
    b.add("Embedding", "2d_indices", [idx, b.u(10, 6)], {"input_dim": 10, "output_dim": 6}, grad=[1])
    idx = np.array([0, 3, 3, 9, 3, 1, 0], dtype=np.float32)  # repeated rows accumulate
    b.add("Embedding", "repeats", [idx, b.u(10, 5)], {"input_dim": 10, "output_dim": 5}, grad=[1])
    idx = np.array([[-3, 0, 2.7], [11, 4, 4.2]], dtype=np.float32)  # clipped and truncated
    b.add("Embedding", "clip", [idx, b.u(5, 3)], {"input_dim": 5, "output_dim": 3}, grad=[1])


def add_cases(b):
    add_convolution(b)
    add_deconvolution(b)
    add_fully_connected(b)
    add_pooling(b)
    add_batch_norm(b)
    add_layer_norm(b)
    add_lrn(b)
    add_dropout(b)
    add_upsampling(b)
    add_embedding(b)
