"""weft.nn layers, combinators, init and the stateful convenience, each against a float64 NumPy
reference written out plainly here (loops and einsum), finite differences for gradients, and
the published parameter counts of ResNet-18 and MobileNetV2."""
import math

import numpy as np
import pytest

import weft
import weft.nn as nn

TOL = dict(rtol=1e-4, atol=1e-5)  # float32 layers against float64 references


def f64(a):
    """An NDArray (or array-like) as a float64 NumPy array."""
    return np.asarray(a.asnumpy() if hasattr(a, "asnumpy") else a, dtype=np.float64)


def npp(params):
    """A Parameters dict as float64 NumPy arrays."""
    return {k: f64(v) for k, v in params.items()}


def randn(rng, *shape):
    """Standard normal float32 values (what the layers get) in a float64 array."""
    return rng.standard_normal(shape).astype(np.float32).astype(np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# ---- references -------------------------------------------------------------------------------

def conv_ref(x, w, b, stride, pad, dilate, groups):
    """N-d cross-correlation (MXNet's Convolution): x (N, C, *S), w (F, C/groups, *K)."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    f, kernel = w.shape[0], w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_size = [(xp.shape[2 + i] - dilate[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(nd)]
    out = np.zeros((n, f, *out_size))
    cg, fg = c // groups, f // groups
    for g in range(groups):
        for off in np.ndindex(*kernel):
            window = tuple(slice(off[i] * dilate[i],
                                 off[i] * dilate[i] + stride[i] * (out_size[i] - 1) + 1,
                                 stride[i]) for i in range(nd))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
            wk = w[(slice(g * fg, (g + 1) * fg), slice(None)) + off]
            out[:, g * fg:(g + 1) * fg] += np.einsum("nc...,fc->nf...", patch, wk)
    if b is not None:
        out += b.reshape((1, f) + (1,) * nd)
    return out


def deconv_ref(x, w, b, stride, pad, adj, dilate, groups):
    """2-D transposed convolution (MXNet's Deconvolution): x (N, C, H, W), w (C, F/groups, kh,
    kw); every input pixel scatters its weighted kernel into the output, then pad is cropped."""
    n, c, h, wd = x.shape
    fg, kh, kw = w.shape[1:]
    f, cg = fg * groups, c // groups
    out_size = [(s - 1) * st - 2 * p + d * (k - 1) + 1 + a
                for s, st, p, d, k, a in zip((h, wd), stride, pad, dilate, (kh, kw), adj)]
    full = [(s - 1) * st + d * (k - 1) + 1 + a
            for s, st, d, k, a in zip((h, wd), stride, dilate, (kh, kw), adj)]
    buf = np.zeros((n, f, *full))
    for g in range(groups):
        for i in range(h):
            for j in range(wd):
                for ki in range(kh):
                    for kj in range(kw):
                        buf[:, g * fg:(g + 1) * fg, i * stride[0] + ki * dilate[0],
                            j * stride[1] + kj * dilate[1]] += \
                            x[:, g * cg:(g + 1) * cg, i, j] @ w[g * cg:(g + 1) * cg, :, ki, kj]
    out = buf[:, :, pad[0]:pad[0] + out_size[0], pad[1]:pad[1] + out_size[1]]
    if b is not None:
        out = out + b.reshape(1, f, 1, 1)
    return out


def pool_ref(x, kernel, stride, pad, kind, ceil_mode=False, count_include_pad=True):
    """MXNet's Pooling: window o covers [o*s - p, o*s - p + k) clipped to the padded input (that
    length is the divisor with count_include_pad), then to the input (the divisor without)."""
    nd = x.ndim - 2
    sizes = x.shape[2:]
    out_size = [(sizes[i] + 2 * pad[i] - kernel[i] + (stride[i] - 1 if ceil_mode else 0))
                // stride[i] + 1 for i in range(nd)]
    out = np.zeros(x.shape[:2] + tuple(out_size))
    for o in np.ndindex(*out_size):
        window, count = [], 1
        for i in range(nd):
            start = o[i] * stride[i] - pad[i]
            end = min(start + kernel[i], sizes[i] + pad[i])
            padded = end - start
            start, end = max(start, 0), min(end, sizes[i])
            assert end > start, "a window wholly in the padding (choose other sizes)"
            count *= padded if count_include_pad else end - start
            window.append(slice(start, end))
        vals = x[(slice(None), slice(None)) + tuple(window)].reshape(x.shape[0], x.shape[1], -1)
        out[(slice(None), slice(None)) + o] = vals.max(-1) if kind == "max" \
            else vals.sum(-1) / count
    return out


GATES = {"rnn_tanh": 1, "lstm": 4, "gru": 3}


def unpack_rnn(flat, mode, input_size, hidden, layers, dirs):
    """MXNet's packing of the fused RNN's parameters: for each layer and direction W_i2h (G*H,
    in) then W_h2h (G*H, H); after all weights, for each layer and direction b_i2h then b_h2h."""
    gh = GATES[mode] * hidden
    pos, out = 0, {}
    for layer in range(layers):
        width = input_size if layer == 0 else dirs * hidden
        for d in range(dirs):
            wi = flat[pos:pos + gh * width].reshape(gh, width)
            pos += gh * width
            wh = flat[pos:pos + gh * hidden].reshape(gh, hidden)
            pos += gh * hidden
            out[layer, d] = [wi, wh]
    for layer in range(layers):
        for d in range(dirs):
            out[layer, d] += [flat[pos:pos + gh], flat[pos + gh:pos + 2 * gh]]
            pos += 2 * gh
    assert pos == flat.size, "parameter vector longer than the packing"
    return out


def rnn_ref(mode, x, flat, hidden, layers=1, dirs=1):
    """The recurrence over x (T, N, I) from zero states: output (T, N, D*H), final h and c
    (L*D, N, H). LSTM gates i, f, g, o; GRU r, z, n with n = tanh(Wx + b_in + r*(Uh + b_hn))."""
    t_len, n, _ = x.shape
    w = unpack_rnn(flat, mode, x.shape[2], hidden, layers, dirs)
    hk = hidden
    inp, h_final, c_final = x, [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            wi, wh, bi, bh = w[layer, d]
            h, c = np.zeros((n, hk)), np.zeros((n, hk))
            ys = np.zeros((t_len, n, hk))
            for t in (range(t_len) if d == 0 else reversed(range(t_len))):
                a = inp[t] @ wi.T + bi
                r = h @ wh.T + bh
                if mode == "rnn_tanh":
                    h = np.tanh(a + r)
                elif mode == "lstm":
                    z = a + r
                    i, f = sigmoid(z[:, :hk]), sigmoid(z[:, hk:2 * hk])
                    g, o = np.tanh(z[:, 2 * hk:3 * hk]), sigmoid(z[:, 3 * hk:])
                    c = f * c + i * g
                    h = o * np.tanh(c)
                else:
                    rg = sigmoid(a[:, :hk] + r[:, :hk])
                    zg = sigmoid(a[:, hk:2 * hk] + r[:, hk:2 * hk])
                    ng = np.tanh(a[:, 2 * hk:] + rg * r[:, 2 * hk:])
                    h = (1 - zg) * ng + zg * h
                ys[t] = h
            outs.append(ys)
            h_final.append(h)
            c_final.append(c)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(h_final), np.stack(c_final)


# ---- Dense and convolutions -------------------------------------------------------------------

@pytest.mark.parametrize("flatten, use_bias, activation", [
    (True, True, None), (True, False, "relu"), (False, True, "tanh"), (False, False, None)])
def test_dense(rng, flatten, use_bias, activation):
    layer = nn.Dense(5, activation=activation, use_bias=use_bias, flatten=flatten)
    x = randn(rng, 3, 4, 6)
    params = layer.init((None, 4, 6), seed=3)
    p = npp(params)
    w = p["dense0_weight"]
    assert w.shape == ((5, 24) if flatten else (5, 6))
    assert ("dense0_bias" in p) == use_bias
    ref = (x.reshape(3, -1) if flatten else x) @ w.T
    if use_bias:
        params["dense0_bias"] = weft.array(rng.standard_normal(5).astype(np.float32))
        ref = ref + f64(params["dense0_bias"])
    ref = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, None: lambda v: v}[activation](ref)
    y = layer.apply(params, x.astype(np.float32))
    assert y.shape == ((3, 5) if flatten else (3, 4, 5))
    np.testing.assert_allclose(f64(y), ref, **TOL)


def test_conv1d(rng):
    layer = nn.Conv1D(6, 3, strides=2, padding=1, dilation=2)
    x = randn(rng, 2, 4, 11)
    params = layer.init((None, 4, 11))
    params["conv0_bias"] = weft.array(rng.standard_normal(6).astype(np.float32))
    p = npp(params)
    assert p["conv0_weight"].shape == (6, 4, 3)
    ref = conv_ref(x, p["conv0_weight"], p["conv0_bias"], (2,), (1,), (2,), 1)
    y = layer.apply(params, x.astype(np.float32))
    assert y.shape == ref.shape == (2, 6, 5)
    np.testing.assert_allclose(f64(y), ref, **TOL)


@pytest.mark.parametrize("cin, channels, kernel, strides, padding, dilation, groups, bias", [
    (3, 4, 3, 1, 0, 1, 1, True),
    (3, 5, (3, 2), (2, 1), (1, 0), 1, 1, True),
    (4, 6, 3, 2, 2, 2, 2, False),
    (6, 6, 3, 1, 1, 1, 6, True),    # depthwise
    (4, 8, (1, 3), (1, 2), (0, 1), (1, 2), 4, True),
])
def test_conv2d(rng, cin, channels, kernel, strides, padding, dilation, groups, bias):
    layer = nn.Conv2D(channels, kernel, strides=strides, padding=padding, dilation=dilation,
                      groups=groups, use_bias=bias)
    x = randn(rng, 2, cin, 9, 8)
    params = layer.init((None, cin, 9, 8))
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    assert params["conv0_weight"].shape == (channels, cin // groups, *k)
    if bias:
        params["conv0_bias"] = weft.array(rng.standard_normal(channels).astype(np.float32))
    else:
        assert "conv0_bias" not in params
    p = npp(params)

    def two(v):
        return (v, v) if isinstance(v, int) else v

    ref = conv_ref(x, p["conv0_weight"], p.get("conv0_bias"), two(strides), two(padding),
                   two(dilation), groups)
    y = layer.apply(params, x.astype(np.float32))
    assert y.shape == ref.shape
    np.testing.assert_allclose(f64(y), ref, **TOL)


def test_conv2d_activation(rng):
    layer = nn.Conv2D(3, 3, padding=1, activation="sigmoid")
    x = randn(rng, 1, 2, 5, 5)
    params = layer.init(x.shape)
    p = npp(params)
    ref = sigmoid(conv_ref(x, p["conv0_weight"], p["conv0_bias"], (1, 1), (1, 1), (1, 1), 1))
    np.testing.assert_allclose(f64(layer.apply(params, x.astype(np.float32))), ref, **TOL)


def test_conv3d(rng):
    layer = nn.Conv3D(4, (2, 3, 3), strides=(1, 2, 1), padding=(0, 1, 1), groups=2)
    x = randn(rng, 2, 4, 4, 6, 5)
    params = layer.init((None, 4, 4, 6, 5))
    params["conv0_bias"] = weft.array(rng.standard_normal(4).astype(np.float32))
    p = npp(params)
    assert p["conv0_weight"].shape == (4, 2, 2, 3, 3)
    ref = conv_ref(x, p["conv0_weight"], p["conv0_bias"], (1, 2, 1), (0, 1, 1), (1, 1, 1), 2)
    y = layer.apply(params, x.astype(np.float32))
    assert y.shape == ref.shape == (2, 4, 3, 3, 5)
    np.testing.assert_allclose(f64(y), ref, **TOL)


@pytest.mark.parametrize("cin, channels, kernel, strides, padding, output_padding, groups, bias", [
    (3, 4, 3, 1, 0, 0, 1, True),
    (3, 2, 3, 2, 1, 1, 1, True),
    (3, 2, 3, 2, 1, 1, 1, False),
    (4, 6, (3, 2), (2, 3), (1, 0), (1, 2), 2, True),
    (4, 6, (3, 2), (2, 3), (1, 0), (1, 2), 2, False),
    (2, 3, 4, 2, 1, 0, 1, True),
])
def test_conv2d_transpose(rng, cin, channels, kernel, strides, padding, output_padding, groups,
                          bias):
    layer = nn.Conv2DTranspose(channels, kernel, strides=strides, padding=padding,
                               output_padding=output_padding, groups=groups, use_bias=bias)
    x = randn(rng, 2, cin, 4, 3)
    params = layer.init((None, cin, 4, 3))
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    assert params["conv0_weight"].shape == (cin, channels // groups, *k)
    if bias:
        params["conv0_bias"] = weft.array(rng.standard_normal(channels).astype(np.float32))
    else:
        assert "conv0_bias" not in params
    p = npp(params)

    def two(v):
        return (v, v) if isinstance(v, int) else v

    ref = deconv_ref(x, p["conv0_weight"], p.get("conv0_bias"), two(strides), two(padding),
                     two(output_padding), (1, 1), groups)
    expected = tuple((s - 1) * st - 2 * pd + kk + a for s, st, pd, kk, a in
                     zip((4, 3), two(strides), two(padding), k, two(output_padding)))
    assert ref.shape[2:] == expected
    y = layer.apply(params, x.astype(np.float32))
    assert y.shape == ref.shape
    np.testing.assert_allclose(f64(y), ref, **TOL)


# ---- normalization and dropout ----------------------------------------------------------------

def _bn_params(layer, rng, shape, c):
    params = layer.init(shape)
    for suffix, value in (("gamma", rng.uniform(0.5, 1.5, c)), ("beta", rng.standard_normal(c)),
                          ("moving_mean", rng.standard_normal(c)),
                          ("moving_var", rng.uniform(0.5, 2.0, c))):
        params[f"batchnorm0_{suffix}"] = weft.array(value.astype(np.float32))
    return params


@pytest.mark.parametrize("scale", [True, False])
def test_batchnorm_inference(rng, scale):
    layer = nn.BatchNorm(epsilon=1e-3, scale=scale)
    x = randn(rng, 3, 4, 2, 3)
    params = _bn_params(layer, rng, (None, 4, 2, 3), 4)
    p = npp(params)
    gamma = p["batchnorm0_gamma"] if scale else np.ones(4)

    def chan(v):
        return v.reshape(1, 4, 1, 1)

    ref = (x - chan(p["batchnorm0_moving_mean"])) / np.sqrt(chan(p["batchnorm0_moving_var"])
                                                           + 1e-3) * chan(gamma) \
        + chan(p["batchnorm0_beta"])
    y = layer.apply(params, x.astype(np.float32))
    np.testing.assert_allclose(f64(y), ref, **TOL)
    # Inference leaves the moving statistics alone.
    for k in ("batchnorm0_moving_mean", "batchnorm0_moving_var"):
        np.testing.assert_array_equal(f64(params[k]), p[k])


def test_batchnorm_training_updates_moving_stats(rng):
    momentum, eps = 0.8, 1e-5
    layer = nn.BatchNorm(momentum=momentum, epsilon=eps)
    x = randn(rng, 5, 3, 2, 4) * 2 + 1
    params = _bn_params(layer, rng, (None, 3, 2, 4), 3)
    p = npp(params)
    mean = np.zeros(3)
    var = np.zeros(3)
    for c in range(3):  # batch statistics, per channel, plainly (biased variance, as MXNet)
        vals = x[:, c].ravel()
        mean[c] = vals.sum() / vals.size
        var[c] = ((vals - mean[c]) ** 2).sum() / vals.size
    ref = np.empty_like(x)
    for c in range(3):
        ref[:, c] = (x[:, c] - mean[c]) / np.sqrt(var[c] + eps) * p["batchnorm0_gamma"][c] \
            + p["batchnorm0_beta"][c]
    y = layer.apply(params, x.astype(np.float32), train=True)
    np.testing.assert_allclose(f64(y), ref, **TOL)
    np.testing.assert_allclose(f64(params["batchnorm0_moving_mean"]),
                               p["batchnorm0_moving_mean"] * momentum + mean * (1 - momentum),
                               **TOL)
    np.testing.assert_allclose(f64(params["batchnorm0_moving_var"]),
                               p["batchnorm0_moving_var"] * momentum + var * (1 - momentum),
                               **TOL)
    # A second step moves them again from the updated values.
    m1, v1 = f64(params["batchnorm0_moving_mean"]), f64(params["batchnorm0_moving_var"])
    layer.apply(params, x.astype(np.float32), train=True)
    np.testing.assert_allclose(f64(params["batchnorm0_moving_mean"]),
                               m1 * momentum + mean * (1 - momentum), **TOL)
    np.testing.assert_allclose(f64(params["batchnorm0_moving_var"]),
                               v1 * momentum + var * (1 - momentum), **TOL)


@pytest.mark.parametrize("shape, axis", [((3, 4, 6), -1), ((2, 5, 3), 1)])
def test_layernorm(rng, shape, axis):
    layer = nn.LayerNorm(axis=axis, epsilon=1e-5)
    x = randn(rng, *shape) * 3 + 0.5
    params = layer.init((None, *shape[1:]))
    c = shape[axis]
    assert params["layernorm0_gamma"].shape == (c,) and params["layernorm0_beta"].shape == (c,)
    params["layernorm0_gamma"] = weft.array(rng.uniform(0.5, 1.5, c).astype(np.float32))
    params["layernorm0_beta"] = weft.array(rng.standard_normal(c).astype(np.float32))
    p = npp(params)
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    bshape = [1] * len(shape)
    bshape[axis] = c
    ref = (x - mean) / np.sqrt(var + 1e-5) * p["layernorm0_gamma"].reshape(bshape) \
        + p["layernorm0_beta"].reshape(bshape)
    np.testing.assert_allclose(f64(layer.apply(params, x.astype(np.float32))), ref, **TOL)


def test_dropout(rng):
    rate = 0.3
    layer = nn.Dropout(rate)
    params = layer.init((None, 500))
    assert len(params) == 0
    x = rng.uniform(0.5, 1.5, (200, 500)).astype(np.float32)
    np.testing.assert_array_equal(layer.apply(params, x).asnumpy(), x)  # inference: identity
    y = layer.apply(params, x, train=True).asnumpy().astype(np.float64)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / (1 - rate), rtol=1e-6)
    frac = kept.mean()
    # 100,000 Bernoulli(0.7) draws: the deviation of the mean is 0.0014; allow about 7 of them.
    assert abs(frac - (1 - rate)) < 0.01, frac
    y2 = layer.apply(params, x, train=True).asnumpy()
    assert not np.array_equal(y2 != 0, kept), "two training calls drew the same mask"


# ---- pooling ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, kind, shape, pool_size, strides, padding, ceil, cip", [
    (nn.MaxPool1D, "max", (2, 3, 9), 3, 2, 0, False, True),
    (nn.MaxPool1D, "max", (2, 3, 6), 3, 2, 1, True, True),
    (nn.AvgPool1D, "avg", (2, 3, 6), 3, 2, 1, True, True),
    (nn.AvgPool1D, "avg", (2, 3, 6), 3, 2, 1, True, False),
    (nn.MaxPool2D, "max", (2, 3, 7, 6), 2, None, 0, False, True),
    (nn.MaxPool2D, "max", (2, 3, 7, 6), (3, 2), (2, 2), (1, 0), True, True),
    (nn.AvgPool2D, "avg", (2, 3, 7, 6), 2, None, 0, True, True),
    (nn.AvgPool2D, "avg", (2, 3, 7, 6), 3, 2, 1, False, True),
    (nn.AvgPool2D, "avg", (2, 3, 7, 6), 3, 2, 1, False, False),
    (nn.AvgPool2D, "avg", (2, 3, 6, 6), 3, 2, 1, True, False),
    (nn.MaxPool3D, "max", (1, 2, 5, 4, 6), 2, None, 0, False, True),
    (nn.MaxPool3D, "max", (1, 2, 5, 4, 6), (3, 2, 2), (2, 1, 2), (1, 0, 1), True, True),
    (nn.AvgPool3D, "avg", (1, 2, 5, 4, 6), (2, 2, 3), (2, 2, 2), (1, 1, 1), False, True),
    (nn.AvgPool3D, "avg", (1, 2, 4, 5, 6), 2, None, (1, 0, 1), True, False),
])
def test_pooling(rng, cls, kind, shape, pool_size, strides, padding, ceil, cip):
    layer = cls(pool_size, strides, padding, ceil_mode=ceil, count_include_pad=cip)
    nd = len(shape) - 2

    def tup(v):
        return (v,) * nd if isinstance(v, int) else v

    k = tup(pool_size)
    s = k if strides is None else tup(strides)
    x = randn(rng, *shape)
    ref = pool_ref(x, k, s, tup(padding), kind, ceil, cip)
    y = layer.apply(layer.init((None, *shape[1:])), x.astype(np.float32))
    assert y.shape == ref.shape
    np.testing.assert_allclose(f64(y), ref, **TOL)


def test_pooling_ceil_mode_adds_a_window(rng):
    x = randn(rng, 1, 1, 7)
    valid = nn.AvgPool1D(2).apply({}, x.astype(np.float32))
    full = nn.AvgPool1D(2, ceil_mode=True).apply({}, x.astype(np.float32))
    assert valid.shape == (1, 1, 3) and full.shape == (1, 1, 4)
    # The last window holds x[6] alone (nothing of it lies in padding): its mean is x[6].
    np.testing.assert_allclose(f64(full)[0, 0, 3], x[0, 0, 6], **TOL)


@pytest.mark.parametrize("cls, shape, reduce", [
    (nn.GlobalAvgPool1D, (2, 3, 7), np.mean),
    (nn.GlobalAvgPool2D, (2, 3, 4, 5), np.mean),
    (nn.GlobalAvgPool3D, (2, 3, 2, 3, 4), np.mean),
    (nn.GlobalMaxPool2D, (2, 3, 4, 5), np.max),
])
def test_global_pooling(rng, cls, shape, reduce):
    layer = cls()
    x = randn(rng, *shape)
    axes = tuple(range(2, len(shape)))
    ref = reduce(x, axis=axes, keepdims=True)
    y = layer.apply(layer.init((None, *shape[1:])), x.astype(np.float32))
    assert y.shape == shape[:2] + (1,) * (len(shape) - 2)
    np.testing.assert_allclose(f64(y), ref, **TOL)


# ---- embedding, flatten, activations ----------------------------------------------------------

def test_embedding(rng):
    layer = nn.Embedding(10, 4)
    params = layer.init((None, 5))
    w = f64(params["embedding0_weight"])
    assert w.shape == (10, 4)
    idx = rng.integers(0, 10, (3, 5))
    y = layer.apply(params, idx.astype(np.float32))
    assert y.shape == (3, 5, 4)
    ref = np.zeros((3, 5, 4))
    for i in range(3):
        for j in range(5):
            ref[i, j] = w[idx[i, j]]
    np.testing.assert_array_equal(f64(y), ref)


def test_flatten(rng):
    x = randn(rng, 2, 3, 4, 5)
    y = nn.Flatten().apply({}, x.astype(np.float32))
    assert y.shape == (2, 60)
    np.testing.assert_array_equal(f64(y), x.reshape(2, 60))


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("make, ref", [
    (lambda: nn.Activation("relu"), lambda x: np.maximum(x, 0)),
    (lambda: nn.Activation("sigmoid"), sigmoid),
    (lambda: nn.Activation("tanh"), np.tanh),
    (lambda: nn.Activation("softrelu"), lambda x: np.log1p(np.exp(x))),
    (lambda: nn.Activation("softsign"), lambda x: x / (1 + np.abs(x))),
    (lambda: nn.ReLU(), lambda x: np.maximum(x, 0)),
    (lambda: nn.Sigmoid(), sigmoid),
    (lambda: nn.Tanh(), np.tanh),
    (lambda: nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (lambda: nn.LeakyReLU(), lambda x: np.where(x > 0, x, 0.01 * x)),
    (lambda: nn.GELU(), _gelu),
    (lambda: nn.ReLU6(), lambda x: np.minimum(np.maximum(x, 0), 6)),
    (lambda: nn.Softmax(), lambda x: _softmax(x, -1)),
    (lambda: nn.Softmax(axis=1), lambda x: _softmax(x, 1)),
])
def test_activations(rng, make, ref):
    layer = make()
    x = randn(rng, 3, 4, 5) * 4  # reaches past ReLU6's 6
    assert np.abs(x).max() > 6
    y = layer.apply(layer.init((None, 4, 5)), x.astype(np.float32))
    np.testing.assert_allclose(f64(y), ref(x), **TOL)


# ---- recurrent layers -------------------------------------------------------------------------

@pytest.mark.parametrize("cls, mode", [(nn.RNN, "rnn_tanh"), (nn.LSTM, "lstm"), (nn.GRU, "gru")])
@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_recurrent_one_layer(rng, cls, mode, layout):
    t_len, n, i, h = 5, 3, 4, 6
    layer = cls(h, layout=layout, return_states=True)
    shape = (t_len, None, i) if layout == "TNC" else (None, t_len, i)
    params = layer.init(shape, seed=7)
    name = f"{layer.name}_parameters"
    g = GATES[mode]
    assert list(params) == [name]
    assert params[name].shape == ((i + h + 2) * g * h,)
    flat = f64(params[name])
    x = randn(rng, t_len, n, i)
    xin = x if layout == "TNC" else x.transpose(1, 0, 2)
    outs = layer.apply(params, xin.astype(np.float32))
    y_ref, h_ref, c_ref = rnn_ref(mode, x, flat, h)
    assert len(outs) == (3 if mode == "lstm" else 2)
    y = f64(outs[0])
    if layout == "NTC":
        assert y.shape == (n, t_len, h)
        y = y.transpose(1, 0, 2)
    assert y.shape == (t_len, n, h)
    np.testing.assert_allclose(y, y_ref, **TOL)
    assert outs[1].shape == (1, n, h)
    np.testing.assert_allclose(f64(outs[1]), h_ref, **TOL)
    if mode == "lstm":
        np.testing.assert_allclose(f64(outs[2]), c_ref, **TOL)
    # Without return_states: the output alone, the same values.
    plain = cls(h, layout=layout, name=layer.name)
    y_only = plain.apply(params, xin.astype(np.float32))
    np.testing.assert_allclose(f64(y_only), f64(outs[0]), **TOL)


@pytest.mark.parametrize("cls, mode", [(nn.RNN, "rnn_tanh"), (nn.LSTM, "lstm"), (nn.GRU, "gru")])
def test_recurrent_bidirectional_two_layers(rng, cls, mode):
    t_len, n, i, h, layers = 4, 2, 3, 5, 2
    layer = cls(h, num_layers=layers, bidirectional=True, return_states=True)
    params = layer.init((t_len, None, i), seed=1)
    flat = f64(params[f"{layer.name}_parameters"])
    g = GATES[mode]
    assert flat.size == ((i + h + 2) * g * h * 2 + (2 * h + h + 2) * g * h * 2)
    x = randn(rng, t_len, n, i)
    outs = layer.apply(params, x.astype(np.float32))
    assert outs[0].shape == (t_len, n, 2 * h)
    assert outs[1].shape == (layers * 2, n, h)
    y_ref, h_ref, c_ref = rnn_ref(mode, x, flat, h, layers, 2)
    np.testing.assert_allclose(f64(outs[0]), y_ref, **TOL)
    np.testing.assert_allclose(f64(outs[1]), h_ref, **TOL)
    if mode == "lstm":
        assert outs[2].shape == (layers * 2, n, h)
        np.testing.assert_allclose(f64(outs[2]), c_ref, **TOL)


def test_recurrent_bad_arguments():
    with pytest.raises(ValueError, match="layout"):
        nn.LSTM(4, layout="NCT")
    with pytest.raises(ValueError, match="activation"):
        nn.RNN(4, activation="sigmoid")


# ---- combinators ------------------------------------------------------------------------------

def test_sequential_nested(rng):
    model = nn.Sequential(nn.Dense(5, activation="relu"),
                          nn.Sequential(nn.Dense(4), nn.Activation("tanh")),
                          nn.Dense(3))
    x = randn(rng, 2, 6)
    params = model.init((None, 6))
    assert [k for k in params if k.endswith("weight")] == \
        ["dense0_weight", "dense1_weight", "dense2_weight"]
    p = npp(params)
    assert len(model) == 3 and isinstance(model[1], nn.Sequential)
    h = np.maximum(x @ p["dense0_weight"].T + p["dense0_bias"], 0)
    h = np.tanh(h @ p["dense1_weight"].T + p["dense1_bias"])
    ref = h @ p["dense2_weight"].T + p["dense2_bias"]
    np.testing.assert_allclose(f64(model.apply(params, x.astype(np.float32))), ref, **TOL)
    # add() appends: the new layer's parameters appear on the next init.
    model.add(nn.Dense(2))
    params = model.init((None, 6))
    assert params["dense3_weight"].shape == (2, 3)


def test_residual_identity(rng):
    block = nn.Sequential(nn.Dense(4), nn.Activation("tanh"), nn.Dense(4))
    model = nn.Residual(block, activation="relu")
    x = randn(rng, 3, 4)
    params = model.init((None, 4))
    params["dense1_bias"] = weft.array(rng.standard_normal(4).astype(np.float32))
    p = npp(params)
    h = np.tanh(x @ p["dense0_weight"].T + p["dense0_bias"])
    ref = np.maximum(h @ p["dense1_weight"].T + p["dense1_bias"] + x, 0)
    assert (ref == 0).any() and (ref > 0).any()  # the activation matters here
    np.testing.assert_allclose(f64(model.apply(params, x.astype(np.float32))), ref, **TOL)


def test_residual_projection(rng):
    block = nn.Conv2D(6, 3, strides=2, padding=1)
    shortcut = nn.Conv2D(6, 1, strides=2, use_bias=False)
    model = nn.Residual(block, shortcut)
    x = randn(rng, 2, 3, 6, 6)
    params = model.init((None, 3, 6, 6))
    p = npp(params)
    assert p["conv1_weight"].shape == (6, 3, 1, 1)
    ref = conv_ref(x, p["conv0_weight"], p["conv0_bias"], (2, 2), (1, 1), (1, 1), 1) \
        + conv_ref(x, p["conv1_weight"], None, (2, 2), (0, 0), (1, 1), 1)
    y = model.apply(params, x.astype(np.float32))
    assert y.shape == (2, 6, 3, 3)
    np.testing.assert_allclose(f64(y), ref, **TOL)


@pytest.mark.parametrize("flatten, axis", [(True, 1), (False, -1), (False, 1)])
def test_concat(rng, flatten, axis):
    units = (3, 2) if axis == -1 else (3, 3)
    model = nn.Concat([nn.Dense(units[0], flatten=flatten), nn.Dense(units[1], flatten=flatten)],
                      axis=axis)
    x = randn(rng, 2, 4, 5)
    params = model.init((None, 4, 5))
    p = npp(params)
    xs = x.reshape(2, -1) if flatten else x
    a = xs @ p["dense0_weight"].T + p["dense0_bias"]
    b = xs @ p["dense1_weight"].T + p["dense1_bias"]
    ref = np.concatenate([a, b], axis=axis)
    y = model.apply(params, x.astype(np.float32))
    assert y.shape == ref.shape
    np.testing.assert_allclose(f64(y), ref, **TOL)


def test_parallel(rng):
    model = nn.Parallel([nn.Dense(3), nn.Activation("sigmoid"), nn.Flatten()])
    x = randn(rng, 2, 4)
    params = model.init((None, 4))
    p = npp(params)
    outs = model.apply(params, x.astype(np.float32))
    assert isinstance(outs, tuple) and len(outs) == 3
    np.testing.assert_allclose(f64(outs[0]), x @ p["dense0_weight"].T + p["dense0_bias"], **TOL)
    np.testing.assert_allclose(f64(outs[1]), sigmoid(x), **TOL)
    np.testing.assert_array_equal(f64(outs[2]), x)
    model.hybridize()
    houts = model.apply(params, x.astype(np.float32))
    assert isinstance(houts, tuple) and len(houts) == 3
    for a, b in zip(houts, outs):
        np.testing.assert_allclose(f64(a), f64(b), **TOL)


def test_lambda_imperative_and_hybridized(rng):
    def fn(F, x):
        return F.clip(x, a_min=-0.5, a_max=1.0) * 3 + F.square(x)

    def ref(x):
        return np.clip(x, -0.5, 1.0) * 3 + x ** 2

    x = randn(rng, 3, 4)
    lam = nn.Lambda(fn)
    params = lam.init((None, 4))
    assert len(params) == 0
    np.testing.assert_allclose(f64(lam.apply(params, x.astype(np.float32))), ref(x), **TOL)
    lam.hybridize()
    np.testing.assert_allclose(f64(lam.apply(params, x.astype(np.float32))), ref(x), **TOL)

    model = nn.Sequential(nn.Dense(4), nn.Lambda(fn))
    params = model.init((None, 4))
    p = npp(params)
    expected = ref(x @ p["dense0_weight"].T + p["dense0_bias"])
    np.testing.assert_allclose(f64(model.apply(params, x.astype(np.float32))), expected, **TOL)
    model.hybridize()
    np.testing.assert_allclose(f64(model.apply(params, x.astype(np.float32))), expected, **TOL)


# ---- init -------------------------------------------------------------------------------------

def test_init_infers_deferred_shapes():
    model = nn.Sequential(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Flatten(), nn.Dense(5))
    for batch in (None, 0):
        params = model.init((batch, 3, 4, 4))
        shapes = {k: tuple(v.shape) for k, v in params.items()}
        assert shapes == {"conv0_weight": (8, 3, 3, 3), "conv0_bias": (8,),
                          "batchnorm0_gamma": (8,), "batchnorm0_beta": (8,),
                          "batchnorm0_moving_mean": (8,), "batchnorm0_moving_var": (8,),
                          "dense0_weight": (5, 128), "dense0_bias": (5,)}
    y = model.apply(params, np.zeros((3, 3, 4, 4), np.float32))
    assert y.shape == (3, 5)


def test_init_input_forms(rng):
    model = nn.Dense(4)
    x = rng.standard_normal((2, 7)).astype(np.float32)
    forms = [(None, 7), [(None, 7)], {"data": (None, 7)}, x, [x], weft.array(x), (2, 7)]
    ref = model.init((None, 7), seed=5)
    assert ref["dense0_weight"].shape == (4, 7)
    for form in forms:
        params = model.init(form, seed=5)
        assert list(params) == list(ref)
        for k in ref:
            np.testing.assert_array_equal(params[k].asnumpy(), ref[k].asnumpy())
    with pytest.raises(TypeError):
        model.init("not a shape")


def test_init_seed_determinism():
    model = nn.Sequential(nn.Conv2D(4, 3), nn.Dense(3))
    a, b, c = (model.init((None, 2, 5, 5), seed=s) for s in (11, 11, 12))
    for k in ("conv0_weight", "dense0_weight"):
        np.testing.assert_array_equal(a[k].asnumpy(), b[k].asnumpy())
        assert not np.array_equal(a[k].asnumpy(), c[k].asnumpy())
    assert a["conv0_weight"].dtype == "float32"
    d = model.init((None, 2, 5, 5), seed=11, dtype="float64")
    assert d["conv0_weight"].dtype == "float64"
    np.testing.assert_allclose(d["conv0_weight"].asnumpy(), a["conv0_weight"].asnumpy(),
                               rtol=1e-7)


def test_init_defaults_and_custom_initializers():
    model = nn.Sequential(nn.Conv2D(4, 3), nn.BatchNorm(), nn.Flatten(),
                          nn.Dense(3, weight_initializer=nn.init.Constant(0.5),
                                   bias_initializer=nn.init.Constant(-2.0)),
                          nn.LayerNorm())
    params = model.init((None, 2, 5, 5), seed=0)
    expect = {"conv0_bias": 0.0, "batchnorm0_gamma": 1.0, "batchnorm0_beta": 0.0,
              "batchnorm0_moving_mean": 0.0, "batchnorm0_moving_var": 1.0,
              "dense0_weight": 0.5, "dense0_bias": -2.0, "layernorm0_gamma": 1.0,
              "layernorm0_beta": 0.0}
    for k, v in expect.items():
        np.testing.assert_array_equal(params[k].asnumpy(), np.full(params[k].shape, v), err_msg=k)
    assert np.abs(params["conv0_weight"].asnumpy()).max() > 0
    # A name or a number works as an initializer too.
    d = nn.Dense(2, weight_initializer="ones", bias_initializer=0.25)
    p = d.init((None, 3))
    np.testing.assert_array_equal(p["dense0_weight"].asnumpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(p["dense0_bias"].asnumpy(), np.full(2, 0.25))
    with pytest.raises(ValueError, match="initializer"):
        nn.Dense(2, weight_initializer="no-such-init").init((None, 3))


@pytest.mark.parametrize("layer, shape, fan_in, fan_out", [
    (nn.Dense(30), (None, 20), 20, 30),
    (nn.Conv2D(8, 3), (None, 3, 6, 6), 27, 72),
])
def test_xavier_default_bounds(layer, shape, fan_in, fan_out):
    params = layer.init(shape, seed=2)
    w = f64(params[f"{layer.name}_weight"])
    bound = math.sqrt(3.0 / ((fan_in + fan_out) / 2.0))
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    # Uniform on [-bound, bound]: the draws reach near both ends (not a narrower law).
    assert w.max() > 0.8 * bound and w.min() < -0.8 * bound
    assert abs(w.mean()) < 0.2 * bound


def test_automatic_and_given_names():
    model = nn.Sequential(nn.Dense(4), nn.Conv1D(2, 1), nn.Dense(3, name="head"),
                          nn.Sequential(nn.Dense(2), nn.BatchNorm()), nn.Conv2D(1, 1))
    model.symbol()
    names = [layer.name for layer in model.walk()]
    assert names == ["sequential0", "dense0", "conv0", "head", "sequential1", "dense1",
                     "batchnorm0", "conv1"]
    model = nn.Sequential(nn.Flatten(), nn.Dense(4), nn.Dense(3, name="head"), nn.Dense(2))
    params = model.init((None, 6))
    assert list(params) == ["dense0_weight", "dense0_bias", "head_weight", "head_bias",
                            "dense1_weight", "dense1_bias"]


def test_parameters_aux_trainable_count():
    model = nn.Sequential(nn.Conv2D(4, 3, use_bias=False), nn.BatchNorm(), nn.Flatten(),
                          nn.Dense(2))
    params = model.init((None, 3, 4, 4))
    assert isinstance(params, nn.Parameters)
    assert params.aux_names == {"batchnorm0_moving_mean", "batchnorm0_moving_var"}
    assert list(params.trainable()) == ["conv0_weight", "batchnorm0_gamma", "batchnorm0_beta",
                                        "dense0_weight", "dense0_bias"]
    assert set(params.auxiliary()) == params.aux_names
    assert params.count() == 4 * 3 * 9 + 4 + 4 + 2 * 16 + 2
    copy = params.copy()
    assert copy.aux_names == params.aux_names
    copy["dense0_bias"] += 1
    np.testing.assert_array_equal(params["dense0_bias"].asnumpy(), np.zeros(2))


# ---- reference models -------------------------------------------------------------------------

def test_resnet18_parameter_count_and_output():
    model = nn.models.resnet18()
    params = model.init((None, 3, 224, 224), seed=0)
    assert params.count() == 11_689_512
    x = weft.random.uniform(shape=(2, 3, 64, 64))
    y = model.apply(params, x)
    assert y.shape == (2, 1000)
    assert np.isfinite(y.asnumpy()).all()


def test_mobilenet_v2_parameter_count():
    params = nn.models.mobilenet_v2().init((None, 3, 224, 224), seed=0)
    assert params.count() == 3_504_872


# ---- the stateful convenience and summary -----------------------------------------------------

def test_initialize_then_call(rng):
    def make():
        return nn.Sequential(nn.Dense(4, activation="relu"), nn.Dense(2))

    x = rng.standard_normal((3, 5)).astype(np.float32)
    model = make()
    with pytest.raises(RuntimeError, match="initialize"):
        model(x)
    assert model.initialize(seed=4) is model
    assert model.params is None  # deferred to the first call
    y = model(x)
    assert set(model.params) == {"dense0_weight", "dense0_bias", "dense1_weight", "dense1_bias"}
    assert model.params["dense0_weight"].shape == (4, 5)
    assert all(v.requires_grad for v in model.params.values())
    expected = make().apply(make().init((None, 5), seed=4), x)
    np.testing.assert_array_equal(y.asnumpy(), expected.asnumpy())
    with weft.autograd.record():
        loss = model(x).sum()
    loss.backward()
    assert np.abs(model.params["dense1_bias"].grad.asnumpy() - 3).max() < 1e-6

    eager = make().initialize(seed=4, inputs=(None, 5))
    assert eager.params is not None and eager.params["dense0_weight"].requires_grad
    np.testing.assert_array_equal(eager(x).asnumpy(), expected.asnumpy())


def test_summary():
    model = nn.Sequential(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.ReLU(),
                          nn.MaxPool2D(), nn.Flatten(), nn.Dense(10, name="classifier"))
    text = model.summary((None, 3, 8, 8))
    for name in ("conv0", "batchnorm0", "activation0", "pool0", "flatten0", "classifier"):
        assert name in text
    for shape in ("(None, 8, 8, 8)", "(None, 8, 4, 4)", "(None, 128)", "(None, 10)"):
        assert shape in text
    params = model.init((None, 3, 8, 8))
    assert params.count() == 8 * 27 + 8 + 16 + 1280 + 10
    assert f"Trainable parameters: {params.count():,}" in text
    assert "Non-trainable (auxiliary) states: 16" in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert lines["classifier"].rstrip().endswith("1,290")
    assert lines["conv0"].rstrip().endswith("224")


# ---- errors -----------------------------------------------------------------------------------

def test_missing_parameter_raises_keyerror():
    model = nn.Sequential(nn.Dense(3), nn.Dense(2))
    params = model.init((None, 4))
    del params["dense1_weight"]
    with pytest.raises(KeyError, match="dense1_weight"):
        model.apply(params, np.zeros((1, 4), np.float32))
    model.hybridize()
    with pytest.raises(KeyError, match="dense1_weight"):
        model.apply(params, np.zeros((1, 4), np.float32))


def test_wrong_input_channels():
    layer = nn.Conv2D(4, 3)
    params = layer.init((None, 3, 8, 8))
    with pytest.raises((weft.ShapeError, ValueError), match="Convolution|conv0"):
        layer.apply(params, np.zeros((1, 5, 8, 8), np.float32))
    dense = nn.Dense(4)
    params = dense.init((None, 6))
    with pytest.raises((weft.ShapeError, ValueError), match="FullyConnected|dense0"):
        dense.apply(params, np.zeros((2, 7), np.float32))


@pytest.mark.parametrize("make", [
    lambda: nn.Conv2D(4, (3, 3, 3)),
    lambda: nn.Conv1D(4, 3, strides=(1, 1)),
    lambda: nn.Conv3D(4, 3, padding=(1, 1)),
    lambda: nn.Conv2DTranspose(4, 3, output_padding=(1, 1, 1)),
    lambda: nn.MaxPool2D((2, 2, 2)),
    lambda: nn.init.Xavier(rnd_type="laplace"),
])
def test_bad_constructor_arguments(make):
    with pytest.raises(ValueError):
        make()


# ---- autograd through layers ------------------------------------------------------------------

def numeric_grad(f, arrays, name, eps=1e-6):
    """Central differences of the scalar f() with respect to arrays[name] (float64, in place)."""
    a = arrays[name]
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + eps
        hi = f()
        a[i] = old - eps
        lo = f()
        a[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g


@pytest.mark.parametrize("hybridize", [False, True])
def test_gradients_match_finite_differences(rng, hybridize):
    model = nn.Sequential(nn.Dense(5), nn.Activation("tanh"), nn.Dense(3))
    x = randn(rng, 4, 6)
    w_out = rng.standard_normal((4, 3))
    params = model.init((None, 6), seed=9)
    params["dense0_bias"] = weft.array(rng.uniform(-0.5, 0.5, 5).astype(np.float32))
    params["dense1_bias"] = weft.array(rng.uniform(-0.5, 0.5, 3).astype(np.float32))
    params.attach_grad()
    if hybridize:
        model.hybridize()
    with weft.autograd.record():
        y = model.apply(params, x.astype(np.float32))
        loss = (y * weft.array(w_out.astype(np.float32))).sum()
    loss.backward()
    p = npp(params)

    def f():
        h = np.tanh(x @ p["dense0_weight"].T + p["dense0_bias"])
        return float(np.sum((h @ p["dense1_weight"].T + p["dense1_bias"]) * w_out))

    np.testing.assert_allclose(float(loss.asnumpy()), f(), rtol=1e-5)
    for name in ("dense0_weight", "dense0_bias", "dense1_weight", "dense1_bias"):
        assert params[name].grad is not None, name
        np.testing.assert_allclose(f64(params[name].grad), numeric_grad(f, p, name),
                                   err_msg=name, **TOL)
