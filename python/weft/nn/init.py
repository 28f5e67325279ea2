"""Parameter initializers. The built-in ones are nn/'s C++ initializers (``weft._weft.nn``):
parameter ``name`` under ``seed`` gets the values ``nn::init`` gives it in C++, bit for bit, so
the same seed gives the same parameters in both languages (Note [One initialiser] in
nn/init.h). Fans follow MXNet's convention: fan_in = shape[1] * receptive field, fan_out =
shape[0] * receptive field.

A custom initializer subclasses ``Initializer`` and defines ``sample(shape, rng)`` with a NumPy
``Generator``, or is any callable ``init(shape, rng)``; its generator is seeded from the seed and
the parameter's name, so it too is deterministic and independent of the other parameters."""
from __future__ import annotations

import zlib

import numpy as np

from .. import _weft

__all__ = ["Initializer", "Zero", "One", "Constant", "Uniform", "Normal", "Xavier", "MSRAPrelu",
           "create", "default_for", "initial_values"]

_native = _weft.nn


class Initializer:
    """Base class. Built-in initializers hold their C++ counterpart in ``_core``; subclasses
    without one define ``sample(shape, rng)``."""

    _core = None

    def values(self, shape, seed, name):
        """The float32 values of parameter ``name`` of ``shape`` under ``seed``."""
        shape = tuple(int(d) for d in shape)
        if self._core is not None:
            return self._core.values(shape, int(seed) & (2**64 - 1), name)
        return self(shape, _numpy_rng(seed, name))

    def __call__(self, shape, rng):
        return np.asarray(self.sample(tuple(shape), rng), dtype=np.float32)

    def sample(self, shape, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k != "_core")
        return f"{type(self).__name__}({fields})"


def _numpy_rng(seed, name):
    # A stream per parameter, as the C++ generator's Rng::for_parameter.
    return np.random.default_rng([int(seed) & (2**64 - 1), zlib.crc32(name.encode())])


class Constant(Initializer):
    """Every element ``value``."""

    def __init__(self, value):
        self.value = float(value)
        self._core = _native.Constant(self.value)

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
        self._core = _native.Uniform(self.scale)


class Normal(Initializer):
    """Normal with mean 0 and deviation ``sigma``."""

    def __init__(self, sigma=0.01):
        self.sigma = float(sigma)
        self._core = _native.Normal(self.sigma)


class Xavier(Initializer):
    """MXNet's Xavier: scale = sqrt(magnitude / fan), fan by ``factor_type`` ('avg', 'in',
    'out'); uniform on [-scale, scale] or normal with deviation scale. The defaults (uniform,
    avg, 3) are Glorot's uniform initialization."""

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3.0):
        # The C++ constructor checks rnd_type and factor_type (ValueError).
        self._core = _native.Xavier(rnd_type, factor_type, float(magnitude))
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)


class MSRAPrelu(Xavier):
    """He's initialization for (P)ReLU networks: gaussian, fan by ``factor_type``, magnitude
    2 / (1 + slope^2)."""

    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope**2))
        self._core = _native.MSRAPrelu(factor_type, float(slope))


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


class _Native(Initializer):
    """A C++ initializer that has no class here (the defaults by name)."""

    def __init__(self, core):
        self._core = core

    def __repr__(self):
        return self._core.describe()


def default_for(name):
    """The default by parameter name, as MXNet's: biases, betas and moving means zero; gammas and
    moving variances one; everything else Xavier uniform. The rule is nn::default_initializer's."""
    return _Native(_native.default_initializer(name))


def initial_values(init, shape, seed, name):
    """The values of parameter ``name`` under ``seed`` from ``init`` (an ``Initializer`` or a
    callable ``init(shape, rng)``), as a float32 NumPy array."""
    if isinstance(init, Initializer):
        return init.values(shape, seed, name)
    return np.asarray(init(tuple(shape), _numpy_rng(seed, name)), dtype=np.float32)
