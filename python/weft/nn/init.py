"""Parameter initializers: callables ``init(shape, rng) -> numpy.ndarray`` drawing from a NumPy
``Generator`` (so ``Layer.init(seed=...)`` is deterministic). Fans follow MXNet's convention:
fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field."""
from __future__ import annotations

import numpy as np

__all__ = ["Initializer", "Zero", "One", "Constant", "Uniform", "Normal", "Xavier", "MSRAPrelu",
           "create", "default_for"]


def _fans(shape):
    if len(shape) < 2:
        n = int(shape[0]) if shape else 1
        return n, n
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return int(shape[1]) * receptive, int(shape[0]) * receptive


class Initializer:
    """Base class: subclasses define ``sample(shape, rng)``."""

    def __call__(self, shape, rng):
        return np.asarray(self.sample(tuple(shape), rng), dtype=np.float32)

    def sample(self, shape, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class Constant(Initializer):
    """Every element ``value``."""

    def __init__(self, value):
        self.value = float(value)

    def sample(self, shape, rng):
        return np.full(shape, self.value)


class Zero(Constant):
    """Zeros."""

    def __init__(self):
        super().__init__(0.0)


class One(Constant):
    """Ones."""

    def __init__(self):
        super().__init__(1.0)


class Uniform(Initializer):
    """Uniform on [-scale, scale]."""

    def __init__(self, scale=0.07):
        self.scale = float(scale)

    def sample(self, shape, rng):
        return rng.uniform(-self.scale, self.scale, size=shape)


class Normal(Initializer):
    """Normal with mean 0 and deviation ``sigma``."""

    def __init__(self, sigma=0.01):
        self.sigma = float(sigma)

    def sample(self, shape, rng):
        return rng.normal(0.0, self.sigma, size=shape)


class Xavier(Initializer):
    """MXNet's Xavier: scale = sqrt(magnitude / fan), fan by ``factor_type`` ('avg', 'in',
    'out'); uniform on [-scale, scale] or normal with deviation scale. The defaults (uniform,
    avg, 3) are Glorot's uniform initialization."""

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3.0):
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier: rnd_type '{rnd_type}': expected 'uniform' or 'gaussian'")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier: factor_type '{factor_type}': expected avg, in or out")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)

    def sample(self, shape, rng):
        fan_in, fan_out = _fans(shape)
        fan = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / max(fan, 1))
        if self.rnd_type == "uniform":
            return rng.uniform(-scale, scale, size=shape)
        return rng.normal(0.0, scale, size=shape)


class MSRAPrelu(Xavier):
    """He's initialization for (P)ReLU networks: gaussian, fan by ``factor_type``, magnitude
    2 / (1 + slope^2)."""

    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope**2))


_NAMED = {"zeros": Zero, "zero": Zero, "ones": One, "one": One, "xavier": Xavier,
          "uniform": Uniform, "normal": Normal, "msraprelu": MSRAPrelu}


def create(spec):
    """An initializer from an instance, a name ('xavier', 'zeros', ...) or a number."""
    if isinstance(spec, Initializer) or callable(spec):
        return spec
    if isinstance(spec, (int, float)):
        return Constant(spec)
    if isinstance(spec, str) and spec.lower() in _NAMED:
        return _NAMED[spec.lower()]()
    raise ValueError(f"initializer {spec!r}: expected an Initializer, a number or one of "
                     f"{', '.join(sorted(_NAMED))}")


def default_for(name):
    """The default by parameter name, as MXNet's: biases, betas and moving means zero; gammas and
    moving variances one; everything else Xavier uniform."""
    for suffix, init in (("bias", Zero), ("beta", Zero), ("moving_mean", Zero),
                         ("running_mean", Zero), ("gamma", One), ("moving_var", One),
                         ("running_var", One)):
        if name.endswith(suffix):
            return init()
    return Xavier()
