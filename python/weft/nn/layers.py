"""The basic layers, each one operator of weft's MXNet-compatible set (named as Gluon names
them: ``dense0_weight``, ``conv0_bias``, ``batchnorm0_moving_mean``)."""
from __future__ import annotations

from .layer import Layer

__all__ = ["Dense", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "BatchNorm", "LayerNorm",
           "Dropout", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D",
           "AvgPool3D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D",
           "GlobalMaxPool2D", "Embedding", "Flatten", "Activation", "LeakyReLU", "ReLU", "Sigmoid",
           "Tanh", "GELU", "Softmax", "ReLU6"]


def _tuple(v, n, what):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(d) for d in v)
    if len(v) != n:
        raise ValueError(f"{what}: expected {n} values, got {v}")
    return v


class Dense(Layer):
    """A fully connected layer: ``y = act(x W^T + b)``, W of shape (units, in_units) with
    in_units inferred. ``flatten``: treat all but the first axis as the features (MXNet's
    default); False applies to the last axis."""

    prefix = "dense"

    def __init__(self, units, activation=None, use_bias=True, flatten=True,
                 weight_initializer=None, bias_initializer="zeros", name=None):
        super().__init__(name)
        self.units, self.activation, self.use_bias, self.flatten = int(units), activation, \
            bool(use_bias), bool(flatten)
        self._inits = {"weight": weight_initializer, "bias": bias_initializer}

    def param_inits(self):
        return {k: v for k, v in self._inits.items() if v is not None}

    def forward(self, ctx, x):
        bias = ctx.param(self, "bias") if self.use_bias else None
        y = ctx.op(self, "FullyConnected", x, ctx.param(self, "weight"), bias,
                   num_hidden=self.units, no_bias=not self.use_bias, flatten=self.flatten)
        if self.activation:
            y = ctx.op(self, "Activation", y, act_type=self.activation, suffix="_act")
        return y

    def _describe(self):
        return f"{self.units}" + (f", activation={self.activation!r}" if self.activation else "")


class _Conv(Layer):
    prefix = "conv"
    _op_name = "Convolution"
    _dims = 2

    def __init__(self, channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", name=None):
        super().__init__(name)
        n = self._dims
        self.channels = int(channels)
        self.kernel = _tuple(kernel_size, n, f"{type(self).__name__} kernel_size")
        self.strides = _tuple(strides, n, f"{type(self).__name__} strides")
        self.padding = _tuple(padding, n, f"{type(self).__name__} padding")
        self.dilation = _tuple(dilation, n, f"{type(self).__name__} dilation")
        self.groups, self.activation, self.use_bias = int(groups), activation, bool(use_bias)
        self._inits = {"weight": weight_initializer, "bias": bias_initializer}

    def param_inits(self):
        return {k: v for k, v in self._inits.items() if v is not None}

    def _extra(self):
        return {"dilate": self.dilation}

    def forward(self, ctx, x):
        bias = ctx.param(self, "bias") if self.use_bias else None
        y = ctx.op(self, self._op_name, x, ctx.param(self, "weight"), bias, kernel=self.kernel,
                   stride=self.strides, pad=self.padding, num_filter=self.channels,
                   num_group=self.groups, no_bias=not self.use_bias, **self._extra())
        if self.activation:
            y = ctx.op(self, "Activation", y, act_type=self.activation, suffix="_act")
        return y

    def _describe(self):
        return (f"{self.channels}, kernel_size={self.kernel}, strides={self.strides}, "
                f"padding={self.padding}")


class Conv1D(_Conv):
    """1-D convolution over (N, C, W): weight (channels, C/groups, k)."""
    _dims = 1


class Conv2D(_Conv):
    """2-D convolution over (N, C, H, W): weight (channels, C/groups, kh, kw)."""
    _dims = 2


class Conv3D(_Conv):
    """3-D convolution over (N, C, D, H, W)."""
    _dims = 3


class Conv2DTranspose(_Conv):
    """Transposed 2-D convolution (MXNet's Deconvolution): weight (C, channels/groups, kh, kw);
    output size strides*(x-1) + dilation*(k-1) + 1 - 2*padding + output_padding."""

    _op_name = "Deconvolution"
    _dims = 2

    def __init__(self, channels, kernel_size, strides=1, padding=0, output_padding=0,
                 dilation=1, groups=1, activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", name=None):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, activation,
                         use_bias, weight_initializer, bias_initializer, name)
        self.output_padding = _tuple(output_padding, 2, "Conv2DTranspose output_padding")

    def _extra(self):
        return {"dilate": self.dilation, "adj": self.output_padding}


class BatchNorm(Layer):
    """Batch normalization over ``axis`` (channels). Training uses batch statistics and updates
    the moving ones in place (``moving = moving*momentum + batch*(1-momentum)``); inference
    uses the moving statistics."""

    prefix = "batchnorm"

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, name=None):
        super().__init__(name)
        self.axis, self.momentum, self.epsilon = int(axis), float(momentum), float(epsilon)
        self.center, self.scale, self.use_global_stats = center, scale, use_global_stats

    def param_inits(self):
        return {"gamma": "ones", "beta": "zeros", "moving_mean": "zeros", "moving_var": "ones"}

    def forward(self, ctx, x):
        p = [ctx.param(self, s) for s in ("gamma", "beta", "moving_mean", "moving_var")]
        return ctx.op(self, "BatchNorm", x, *p, axis=self.axis, momentum=self.momentum,
                      eps=self.epsilon, fix_gamma=not self.scale,
                      use_global_stats=self.use_global_stats)


class LayerNorm(Layer):
    """Layer normalization along ``axis``: gamma and beta of the axis' length."""

    prefix = "layernorm"

    def __init__(self, axis=-1, epsilon=1e-5, name=None):
        super().__init__(name)
        self.axis, self.epsilon = int(axis), float(epsilon)

    def forward(self, ctx, x):
        return ctx.op(self, "LayerNorm", x, ctx.param(self, "gamma"), ctx.param(self, "beta"),
                      axis=self.axis, eps=self.epsilon)


class Dropout(Layer):
    """Inverted dropout with drop probability ``rate`` (identity at inference). ``axes``: axes
    along which the mask is shared."""

    prefix = "dropout"

    def __init__(self, rate, axes=(), name=None):
        super().__init__(name)
        self.rate, self.axes = float(rate), tuple(axes)

    def forward(self, ctx, x):
        return ctx.op(self, "Dropout", x, p=self.rate, axes=self.axes)


class _Pool(Layer):
    prefix = "pool"
    _dims = 2
    _type = "max"
    _global = False

    def __init__(self, pool_size=2, strides=None, padding=0, ceil_mode=False,
                 count_include_pad=True, name=None):
        super().__init__(name)
        n = self._dims
        self.pool_size = _tuple(pool_size, n, f"{type(self).__name__} pool_size")
        self.strides = self.pool_size if strides is None else \
            _tuple(strides, n, f"{type(self).__name__} strides")
        self.padding = _tuple(padding, n, f"{type(self).__name__} padding")
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)

    def forward(self, ctx, x):
        if self._global:
            return ctx.op(self, "Pooling", x, kernel=(1,) * self._dims, pool_type=self._type,
                          global_pool=True)
        attrs = {"count_include_pad": self.count_include_pad} if self._type == "avg" else {}
        return ctx.op(self, "Pooling", x, kernel=self.pool_size, stride=self.strides,
                      pad=self.padding, pool_type=self._type,
                      pooling_convention="full" if self.ceil_mode else "valid", **attrs)

    def _describe(self):
        if self._global:
            return ""
        return f"pool_size={self.pool_size}, strides={self.strides}, padding={self.padding}"


def _pool(name, dims, kind, is_global=False, doc=""):
    cls = type(name, (_Pool,), {"_dims": dims, "_type": kind, "_global": is_global,
                                "__doc__": doc})
    if is_global:
        def __init__(self, name=None):  # noqa: N807 - a generated class' constructor
            _Pool.__init__(self, 1, name=name)
        cls.__init__ = __init__
    return cls


MaxPool1D = _pool("MaxPool1D", 1, "max", doc="Max pooling over (N, C, W).")
MaxPool2D = _pool("MaxPool2D", 2, "max", doc="Max pooling over (N, C, H, W).")
MaxPool3D = _pool("MaxPool3D", 3, "max", doc="Max pooling over (N, C, D, H, W).")
AvgPool1D = _pool("AvgPool1D", 1, "avg", doc="Average pooling over (N, C, W).")
AvgPool2D = _pool("AvgPool2D", 2, "avg", doc="Average pooling over (N, C, H, W).")
AvgPool3D = _pool("AvgPool3D", 3, "avg", doc="Average pooling over (N, C, D, H, W).")
GlobalAvgPool1D = _pool("GlobalAvgPool1D", 1, "avg", True, "Mean over W: (N, C, 1).")
GlobalAvgPool2D = _pool("GlobalAvgPool2D", 2, "avg", True, "Mean over H, W: (N, C, 1, 1).")
GlobalAvgPool3D = _pool("GlobalAvgPool3D", 3, "avg", True, "Mean over D, H, W.")
GlobalMaxPool2D = _pool("GlobalMaxPool2D", 2, "max", True, "Max over H, W: (N, C, 1, 1).")


class Embedding(Layer):
    """Rows of a (input_dim, output_dim) table for integer indices: output
    ``indices.shape + (output_dim,)``."""

    prefix = "embedding"

    def __init__(self, input_dim, output_dim, weight_initializer="uniform", name=None):
        super().__init__(name)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self._init = weight_initializer

    def param_inits(self):
        return {"weight": self._init}

    def forward(self, ctx, x):
        return ctx.op(self, "Embedding", x, ctx.param(self, "weight"), input_dim=self.input_dim,
                      output_dim=self.output_dim)

    def _describe(self):
        return f"{self.input_dim} -> {self.output_dim}"


class Flatten(Layer):
    """(N, d1, ..., dn) -> (N, d1*...*dn)."""

    prefix = "flatten"

    def forward(self, ctx, x):
        return ctx.op(self, "Flatten", x)


class Activation(Layer):
    """An activation by name: relu, sigmoid, tanh, softrelu, softsign."""

    prefix = "activation"

    def __init__(self, activation, name=None):
        super().__init__(name)
        self.activation = activation

    def forward(self, ctx, x):
        return ctx.op(self, "Activation", x, act_type=self.activation)

    def _describe(self):
        return repr(self.activation)


class LeakyReLU(Layer):
    """x for x > 0, alpha*x otherwise."""

    prefix = "leakyrelu"

    def __init__(self, alpha=0.01, name=None):
        super().__init__(name)
        self.alpha = float(alpha)

    def forward(self, ctx, x):
        return ctx.op(self, "LeakyReLU", x, act_type="leaky", slope=self.alpha)


class GELU(Layer):
    """Gaussian error linear unit (the erf form)."""

    prefix = "gelu"

    def forward(self, ctx, x):
        return ctx.op(self, "LeakyReLU", x, act_type="gelu")


def ReLU(name=None):  # noqa: N802 - a layer constructor
    """Activation('relu')."""
    return Activation("relu", name)


def Sigmoid(name=None):  # noqa: N802
    """Activation('sigmoid')."""
    return Activation("sigmoid", name)


def Tanh(name=None):  # noqa: N802
    """Activation('tanh')."""
    return Activation("tanh", name)


class Softmax(Layer):
    """Softmax along ``axis``."""

    prefix = "softmax"

    def __init__(self, axis=-1, name=None):
        super().__init__(name)
        self.axis = int(axis)

    def forward(self, ctx, x):
        return ctx.op(self, "softmax", x, axis=self.axis)


class ReLU6(Layer):
    """min(max(x, 0), 6) (MobileNet's activation)."""

    prefix = "relu6"

    def forward(self, ctx, x):
        return ctx.op(self, "clip", x, a_min=0.0, a_max=6.0)
