"""weft.nn export and import: ``model.export`` writes MXNet's checkpoint pair (``-symbol.json``
and ``-0000.params`` with ``arg:``/``aux:`` names), ``weft.nn.import_model`` reads it back as a
SymbolLayer whose outputs and gradients equal the original model's; errors name what is wrong.
With WEFT_MXNET_PYTHON set (an MXNet 1.9.1 venv's Python), real MXNet loads the export too
(tests/mxnet/nn_export_check.py)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft import autograd as ag

CHECK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                            "mxnet", "nn_export_check.py")


def assert_close(actual, expected, rtol, what=""):
    """Per element |a - e| <= atol + rtol*|e|, atol a tenth of rtol times the largest |e|."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    atol = rtol * 0.1 * max(float(np.abs(expected).max(initial=0.0)), 1e-30)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def perturb_batchnorm(params, rng):
    """gamma, beta and the moving statistics off their initial 1/0, so a lost one shows."""
    for name, v in params.items():
        if name.endswith("_gamma") or name.endswith("_moving_var"):
            v[:] = rng.uniform(0.5, 1.5, v.shape).astype(np.float32)
        elif name.endswith("_beta") or name.endswith("_moving_mean"):
            v[:] = rng.uniform(-0.2, 0.2, v.shape).astype(np.float32)
    return params


def cnn_bn():
    return nn.Sequential(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.ReLU(), nn.MaxPool2D(2),
                         nn.Flatten(), nn.Dropout(0.5), nn.Dense(5))


def build(name, rng):
    if name == "cnn":
        model, shape = cnn_bn(), (2, 3, 8, 8)
    elif name == "resnet18":
        model, shape = nn.models.resnet18(classes=10), (2, 3, 32, 32)
    else:
        model, shape = nn.Sequential(nn.LSTM(5, layout="NTC"), nn.Dense(3)), (2, 4, 3)
    params = perturb_batchnorm(model.init((None,) + shape[1:], seed=5), rng)
    return model, params, rng.standard_normal(shape).astype(np.float32)


def test_export_writes_the_checkpoint_pair(tmp_path, rng):
    model, params, _ = build("cnn", rng)
    paths = model.export(tmp_path / "cnn", params)
    assert paths == (f"{tmp_path}/cnn-symbol.json", f"{tmp_path}/cnn-0000.params")
    for p in paths:
        assert os.path.getsize(p) > 0
    graph = json.loads(open(paths[0]).read())
    ops = [n["op"] for n in graph["nodes"] if n["op"] != "null"]
    assert ops == ["Convolution", "BatchNorm", "Activation", "Pooling", "Flatten", "Dropout",
                   "FullyConnected"]
    variables = [n["name"] for n in graph["nodes"] if n["op"] == "null"]
    assert variables[0] == "data"
    assert sorted(variables[1:]) == sorted(params)
    saved = weft.load(paths[1])
    assert sorted(saved) == sorted(
        [f"arg:{k}" for k in params.trainable()] + [f"aux:{k}" for k in params.auxiliary()])
    assert sorted(params.auxiliary()) == ["batchnorm0_moving_mean", "batchnorm0_moving_var"]
    for key, value in saved.items():
        np.testing.assert_array_equal(value.asnumpy(), params[key[4:]].asnumpy(), err_msg=key)
    # Another epoch, another file name.
    assert model.export(tmp_path / "cnn", params, epoch=12)[1] == f"{tmp_path}/cnn-0012.params"


@pytest.mark.parametrize("name", ["cnn", "resnet18", "lstm"])
def test_import_reproduces_outputs(name, tmp_path, rng):
    model, params, x = build(name, rng)
    expected = model.apply(params, x).asnumpy()
    model.export(tmp_path / name, params)
    layer, loaded = nn.import_model(tmp_path / name)
    assert isinstance(layer, nn.SymbolLayer)
    assert isinstance(loaded, nn.Parameters)
    assert sorted(loaded) == sorted(params)
    assert loaded.aux_names == params.aux_names
    for k in params:
        np.testing.assert_array_equal(loaded[k].asnumpy(), params[k].asnumpy(), err_msg=k)
    got = layer.apply(loaded, x).asnumpy()
    # The imported graph runs bound with inference fusion: float32 rounding may differ.
    assert_close(got, expected, rtol=1e-5, what=f"{name}: imported vs imperative")
    model.hybridize()
    assert_close(got, model.apply(params, x).asnumpy(), rtol=1e-6,
                 what=f"{name}: imported vs hybridized")
    # Another batch size binds again.
    x3 = rng.standard_normal((3,) + x.shape[1:]).astype(np.float32)
    model.hybridize(False)
    assert_close(layer.apply(loaded, x3).asnumpy(), model.apply(params, x3).asnumpy(),
                 rtol=1e-5, what=f"{name}: batch 3")


def test_export_of_an_initialized_model(tmp_path, rng):
    """``initialize`` then a call: export without params= uses the model's own."""
    model = nn.Sequential(nn.Dense(4, activation="tanh"), nn.Dense(2)).initialize(seed=3)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    y = model(x).asnumpy()
    model.export(tmp_path / "mlp")
    layer, loaded = nn.import_model(tmp_path / "mlp")
    assert_close(layer.apply(loaded, x).asnumpy(), y, rtol=1e-6)


def test_symbol_layer_gradients_equal_the_original(tmp_path, rng):
    """Training mode under autograd: parameter and input gradients and the updated moving
    statistics of the imported graph equal the original model's."""
    model = nn.Sequential(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.ReLU(),
                          nn.MaxPool2D(2), nn.Flatten(), nn.Dense(5))  # no Dropout: no masks
    params = perturb_batchnorm(model.init((None, 3, 8, 8), seed=5), rng)
    x_np = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    model.export(tmp_path / "cnn", params)
    layer, loaded = nn.import_model(tmp_path / "cnn")
    w = weft.array(rng.standard_normal((2, 5)).astype(np.float32))
    results = []
    for net, p in ((model, params.copy()), (layer, loaded.copy())):
        p.attach_grad()
        x = weft.array(x_np)
        x.attach_grad()
        with ag.record():
            loss = (net.apply(p, x, train=True) * w).sum()
        loss.backward()
        results.append((p, x.grad.asnumpy()))
    (p_ref, gx_ref), (p_imp, gx_imp) = results
    for k in p_ref.trainable():
        assert_close(p_imp[k].grad.asnumpy(), p_ref[k].grad.asnumpy(), rtol=1e-5, what=k)
    for k in p_ref.auxiliary():
        assert np.abs(p_ref[k].asnumpy() - params[k].asnumpy()).max() > 1e-6, k
        assert_close(p_imp[k].asnumpy(), p_ref[k].asnumpy(), rtol=1e-5, what=k)
    assert_close(gx_imp, gx_ref, rtol=1e-5, what="input gradient")


def test_symbol_layer_cannot_be_nested(tmp_path, rng):
    model, params, _ = build("cnn", rng)
    model.export(tmp_path / "cnn", params)
    layer, _ = nn.import_model(tmp_path / "cnn")
    with pytest.raises(NotImplementedError, match="cannot be traced"):
        nn.Sequential(layer, nn.Dense(2)).init((None, 3, 8, 8))


def test_import_errors_are_clear(tmp_path, rng):
    with pytest.raises(ValueError, match="missing-symbol.json"):
        nn.import_model(tmp_path / "missing")
    model, params, x = build("cnn", rng)
    model.export(tmp_path / "cnn", params)
    with pytest.raises(ValueError, match="cnn-0003.params"):
        nn.import_model(tmp_path / "cnn", epoch=3)
    with pytest.raises(ValueError, match="'image' is not an argument"):
        nn.import_model(tmp_path / "cnn", input_names=("image",))
    layer, loaded = nn.import_model(tmp_path / "cnn")
    with pytest.raises(ValueError, match="called with 2 inputs"):
        layer.apply(loaded, x, x)
    del loaded["dense0_weight"]
    with pytest.raises(KeyError, match="dense0_weight"):
        layer.apply(loaded, x)


def test_export_errors_are_clear(tmp_path, rng):
    model = cnn_bn()
    with pytest.raises(ValueError, match="no parameters"):
        model.export(tmp_path / "none")
    params = model.init((None, 3, 8, 8))
    del params["batchnorm0_moving_var"]
    with pytest.raises(KeyError, match="batchnorm0_moving_var"):
        model.export(tmp_path / "partial", params)
    assert not os.path.exists(tmp_path / "partial-symbol.json")


# ---- real MXNet (optional) ----------------------------------------------------------------------
MXNET_MODELS = ["cnn-bn-dropout", "lstm-2layer-bidirectional", "gru", "resnet18-classes10",
                "mobilenetv2-classes10"]


@pytest.mark.skipif(not os.environ.get("WEFT_MXNET_PYTHON"),
                    reason="WEFT_MXNET_PYTHON (an MXNet 1.9.1 venv's python) is not set")
@pytest.mark.parametrize("name", MXNET_MODELS)
def test_mxnet_loads_the_export(name, tmp_path):
    proc = subprocess.run(
        [sys.executable, CHECK_SCRIPT, "--weft-python", sys.executable, "--mxnet-python",
         os.environ["WEFT_MXNET_PYTHON"], "--out", str(tmp_path), "--models", name],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ok   {name}:" in proc.stdout, proc.stdout
