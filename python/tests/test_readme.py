"""The README's Python example runs as written, and its numbers are right."""
import pathlib
import re

import numpy as np
import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_blocks():
    text = README.read_text()
    section = text.split("### From Python", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_example_runs(capsys):
    blocks = python_blocks()
    assert blocks, "the README has no Python example"
    scope = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)  # noqa: S102 - our own README
    weft = scope["weft"]
    # Ten SGD steps on a linear softmax model from zero bias and small weights: the loss starts
    # near log(10) and must go down.
    assert 0 < scope["loss"].item() < np.log(10) + 0.1
    # The pooling result and its NumPy view share one buffer; the imported array has the values.
    y, t, z = scope["y"], scope["t"], scope["z"]
    assert y.shape == (64, 1, 14, 14) and t.shape == y.shape
    assert t.__array_interface__["data"][0] == y._data_ptr()
    np.testing.assert_array_equal(z.asnumpy(), np.arange(6.0).reshape(2, 3))
    x = scope["x"].asnumpy().reshape(64, 1, 14, 2, 14, 2)
    np.testing.assert_array_equal(t, x.max(axis=(3, 5)))
    probs = scope["probs"].asnumpy()
    assert probs.shape == (1, 1000)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    gelu = scope["py_gelu"]
    out = weft.op.py_gelu(weft.arange(4)).asnumpy()
    v = np.arange(4, dtype=np.float64)
    ref = 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    assert gelu is not None


def test_readme_data_pipeline_runs(tmp_path):
    """The README's weft.data example runs on an image folder made here."""
    text = README.read_text()
    section = text.split("### Input pipelines: `weft.data`", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the README's weft.data section has no Python example"
    import weft.data as wd

    rng = np.random.default_rng(0)
    for c in range(2):
        (tmp_path / f"class{c}").mkdir()
        for i in range(35):
            img = rng.integers(0, 256, (210, 230, 3), dtype=np.uint8)
            (tmp_path / f"class{c}" / f"{i}.jpg").write_bytes(wd.encode_jpeg(img))
    code = blocks[0].replace('"train/"', repr(str(tmp_path)))
    code = code.replace("    ...", "    seen.append((images.shape, labels.shape))")
    scope = {"seen": []}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own README
    # 70 images in batches of 64 with the remainder dropped: one batch.
    assert scope["seen"] == [((64, 3, 224, 224), (64,))]
