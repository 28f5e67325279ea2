"""weft.nn's initial values are nn/'s C++ ones (Note [One initialiser] in nn/init.h): the same
network built in Python and through the C++ layers with one seed has bit-identical parameters,
and the values match a pure-Python implementation of the generator written out here
(mt19937_64 seeded per parameter by splitmix64 and FNV-1a, 53-bit uniforms)."""
import math
import struct

import numpy as np
import pytest

import weft.nn as nn
from weft import _weft

M64 = (1 << 64) - 1


def _mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def _fnv1a(name):
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


class _MT64:
    """mt19937_64 as the C++ standard defines it."""

    def __init__(self, seed):
        self.mt = [seed & M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64)
        self.i = 312

    def next(self):
        if self.i >= 312:
            for k in range(312):
                x = (self.mt[k] & 0xFFFFFFFF80000000) | (self.mt[(k + 1) % 312] & 0x7FFFFFFF)
                xa = (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
                self.mt[k] = self.mt[(k + 156) % 312] ^ xa
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & M64


def _f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def reference_uniform(seed, name, n, scale):
    g = _MT64(_mix(_mix(seed) ^ _fnv1a(name)))
    return np.array([_f32(-scale + 2 * scale * ((g.next() >> 11) * 2.0**-53)) for _ in range(n)],
                    dtype=np.float32)


def test_reference_generator_is_mt19937_64():
    g = _MT64(5489)
    for _ in range(9999):
        g.next()
    assert g.next() == 9981545732273789042  # the standard's check value


def test_values_match_the_independent_generator():
    # Xavier's Glorot scale for a (3, 4) weight: sqrt(3 / 3.5).
    p = nn.Dense(3).init((None, 4), seed=0)
    ref = reference_uniform(0, "dense0_weight", 12, math.sqrt(3 / 3.5)).reshape(3, 4)
    np.testing.assert_array_equal(p["dense0_weight"].asnumpy(), ref)
    u = nn.init.Uniform(0.5).values((7,), 42, "some_name")
    np.testing.assert_array_equal(u, reference_uniform(42, "some_name", 7, 0.5))


def _python_net():
    return nn.Sequential(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
                         nn.Flatten(), nn.Dense(5, weight_initializer=nn.init.Uniform(0.3)),
                         nn.Dense(2, weight_initializer=nn.init.MSRAPrelu("in", 0.1)))


def _cpp_net():
    c = _weft.nn
    return c.Sequential([c.Conv2D(4, 3, padding=1), c.BatchNorm(), c.Activation("relu"),
                         c.Flatten(), c.Dense(5, weight_init=c.Uniform(0.3)),
                         c.Dense(2, weight_init=c.MSRAPrelu("in", 0.1))])


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_same_seed_same_parameters_in_cpp_and_python(seed):
    shape = (None, 2, 6, 6)
    py = _python_net().init(shape, seed=seed)
    cpp = dict(_weft.nn.init(_cpp_net(), [shape], seed))
    assert sorted(py) == sorted(cpp)
    assert set(py.aux_names) == {"batchnorm0_moving_mean", "batchnorm0_moving_var"}
    for name, value in cpp.items():
        a, b = py[name].asnumpy(), value.asnumpy()
        assert a.dtype == b.dtype == np.float32
        assert a.tobytes() == b.tobytes(), name  # bit for bit
    assert np.abs(py["conv0_weight"].asnumpy()).max() > 0


def test_custom_initializers_are_deterministic_per_parameter():
    class Halves(nn.init.Initializer):
        def sample(self, shape, rng):
            return rng.uniform(0.0, 0.5, size=shape)

    def ones_plus_noise(shape, rng):
        return 1 + rng.normal(0.0, 0.01, size=shape)

    net = nn.Sequential(nn.Dense(3, weight_initializer=Halves()),
                        nn.Dense(2, weight_initializer=ones_plus_noise))
    a, b = (net.init((None, 4), seed=3) for _ in range(2))
    for k in a:
        np.testing.assert_array_equal(a[k].asnumpy(), b[k].asnumpy())
    w = a["dense0_weight"].asnumpy()
    assert w.min() >= 0 and w.max() <= 0.5 and w.std() > 0
    assert abs(a["dense1_weight"].asnumpy().mean() - 1) < 0.05


def test_native_initializers_check_their_arguments():
    with pytest.raises(ValueError, match="rnd_type"):
        nn.init.Xavier(rnd_type="laplace")
    with pytest.raises(ValueError, match="factor_type"):
        nn.init.MSRAPrelu(factor_type="sideways")
    assert "Xavier" in repr(nn.init.Xavier()) and "_core" not in repr(nn.init.Xavier())


def test_defaults_by_name_are_the_cpp_rule():
    for name, value in (("dense0_bias", 0.0), ("batchnorm0_beta", 0.0), ("x_moving_mean", 0.0),
                        ("batchnorm0_gamma", 1.0), ("x_running_var", 1.0)):
        np.testing.assert_array_equal(nn.init.default_for(name).values((3,), 1, name),
                                      np.full(3, value, np.float32), err_msg=name)
    w = nn.init.default_for("dense0_weight").values((3, 4), 0, "dense0_weight")
    np.testing.assert_array_equal(w, reference_uniform(0, "dense0_weight", 12,
                                                       math.sqrt(3 / 3.5)).reshape(3, 4))
