"""weft.load_plugin: operators from a C plugin (the C++ tree's tests/capi/test_plugin.c, which
registers plugin_double: out = 2 * in, float32 only) appear in weft.op and run on the engine."""
import os
from pathlib import Path

import numpy as np
import pytest

import weft

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(os.environ.get("WEFT_BUILD_DIR") or ROOT / "build") / "tests" / "capi"


def _plugin(name):
    path = PLUGINS / f"weft_{name}.so"
    if not path.is_file():
        pytest.skip(f"{path} is not built (the C++ tests; set WEFT_BUILD_DIR)")
    return path


@pytest.fixture(scope="module")
def test_plugin():
    path = _plugin("test_plugin")
    weft.load_plugin(path)  # a pathlib.Path is accepted
    return path


@pytest.mark.parametrize("shape", [(5,), (3, 70, 40)])  # inline on the caller / on a worker
def test_plugin_operator_matches_numpy(test_plugin, rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    y = weft.op.plugin_double(weft.array(a))
    assert y.shape == shape and y.dtype == np.float32
    np.testing.assert_array_equal(y.asnumpy(), 2 * a)  # exact: doubling is exact in float32
    # Composed with built-in operators, and invoked by name.
    z = weft.op.plugin_double(y) + 1
    np.testing.assert_array_equal(z.asnumpy(), 4 * a + 1)
    (w,) = weft._weft._invoke("plugin_double", [weft.array(a)])
    np.testing.assert_array_equal(w.asnumpy(), 2 * a)


def test_plugin_operator_is_described_and_in_sym(test_plugin):
    assert "plugin_double" in weft.op.list()
    d = weft.op.describe("plugin_double")
    assert d["description"] == "2 * data (from the test plugin)"
    assert d["inputs"] == ["data"] and d["cpu"] and not d["has_gradient"]
    assert "2 * data" in weft.op.plugin_double.__doc__
    assert callable(weft.sym.plugin_double)


def test_plugin_kernel_error_surfaces_at_the_wait(test_plugin):
    y = weft.op.plugin_double(weft.array(np.ones(4, dtype=np.float64), dtype=np.float64))
    with pytest.raises(weft.WeftError, match="plugin_double takes float32"):
        y.asnumpy()
    with pytest.raises(weft.EngineError):
        weft.waitall()


def test_loading_twice_does_nothing(test_plugin):
    weft.load_plugin(str(test_plugin))
    np.testing.assert_array_equal(weft.op.plugin_double(weft.ones((2,))).asnumpy(), [2.0, 2.0])


def test_bad_paths_raise_with_the_path(tmp_path):
    missing = tmp_path / "no_such_plugin.so"
    with pytest.raises(ValueError, match="could not be loaded") as info:
        weft.load_plugin(missing)
    assert str(missing) in str(info.value)
    not_library = tmp_path / "text.so"
    not_library.write_text("not a shared library")
    with pytest.raises(ValueError) as info:
        weft.load_plugin(not_library)
    assert str(not_library) in str(info.value)


def test_libraries_that_are_not_plugins_are_refused():
    path = _plugin("not_a_plugin")
    with pytest.raises(ValueError, match="is not a weft plugin") as info:
        weft.load_plugin(path)
    assert str(path) in str(info.value)
    path = _plugin("bad_version_plugin")
    with pytest.raises(ValueError, match="C ABI version 999") as info:
        weft.load_plugin(path)
    assert str(path) in str(info.value)
