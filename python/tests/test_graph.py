"""weft.graph and weft.sym: symbols, executors and parameter files, checked against the C++
CLI's own runs of bundled models, NumPy float64, and (when installed) MXNet 1.9.1."""
import json
import os
import pickle
import shutil
import subprocess
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import weft
from weft import sym

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT.parent / "shared" / "models"
SQUEEZENET = MODELS / "miaow1988__SqueezeNet_v1.2__model-symbol.json"
GLUON_MLP = MODELS / "kylehoffpauir__AdvOSBig__net-symbol.json"
MXNET_PYTHON = Path("/work/mxvenv/bin/python")


def _cli():
    path = os.environ.get("WEFT_CLI") or str(ROOT / "build" / "tools" / "weft")
    if not os.access(path, os.X_OK):
        path = shutil.which("weft")
    if not path:
        pytest.skip("the weft CLI is not built (set WEFT_CLI)")
    return path


def _replay(graph, tmp_path, *args):
    """Runs `weft replay` once; returns the directory of its outputs."""
    out = tmp_path / "cli_out"
    cmd = [_cli(), "replay", str(graph), "--quiet", "--warmup", "0", "--iters", "1",
           "--save-outputs", str(out), *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def _mlp(hidden=3, classes=2):
    data = sym.Variable("data")
    fc1 = sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    act = sym.Activation(fc1, act_type="relu", name="relu1")
    return sym.FullyConnected(act, num_hidden=classes, name="fc2")


def _mlp_reference(x, w1, b1, w2, b2, head_grad):
    """Forward and gradients of fc2(relu(fc1(x))) in float64."""
    x, w1, b1, w2, b2, g = (np.asarray(a, np.float64) for a in (x, w1, b1, w2, b2, head_grad))
    z = x @ w1.T + b1
    h = np.maximum(z, 0)
    y = h @ w2.T + b2
    dh = g @ w2
    dz = dh * (z > 0)
    grads = {"data": dz @ w1, "fc1_weight": dz.T @ x, "fc1_bias": dz.sum(0),
             "fc2_weight": g.T @ h, "fc2_bias": g.sum(0)}
    return y, grads


# ---- against the C++ CLI -----------------------------------------------------------------------

@pytest.mark.skipif(not SQUEEZENET.exists(), reason="bundled models absent")
def test_squeezenet_matches_cli_replay(tmp_path, rng):
    # Two heads: the softmax and an internal convolution, so values are compared before the
    # softmax flattens them. The graph goes to the CLI as JSON written by Python.
    net = weft.graph.load(SQUEEZENET)
    internal = net.get_internals()["fire9_concat_output"]
    both = sym.Group([net, internal])
    assert both.list_outputs() == ["softmax_output", "fire9_concat_output"]
    graph = tmp_path / "two_heads-symbol.json"
    both.save(graph)
    x = rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    params = tmp_path / "weights.params"
    out = _replay(graph, tmp_path, "--input", f"data={tmp_path / 'x.npy'}", "--seed", "3",
                  "--save-params", str(params))

    arg_params, aux_params = weft.graph.load_params(params)
    assert set(arg_params) == set(both.list_arguments()) - {"data", "softmax_label"}
    assert aux_params == {}
    ex = both.bind(args=arg_params, aux=aux_params, shapes={"data": x.shape})
    outputs = ex.forward(data=x)
    assert len(outputs) == 2
    for k, got in enumerate(outputs):
        want = np.load(out / f"{k}.npy")
        assert ex.output_shapes[k] == want.shape == got.shape
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=1e-7)
    # The internal head alone, bound with the whole model's parameters (MXNet's feature
    # extraction): the arrays its part of the graph lacks are skipped when asked to.
    with pytest.raises(ValueError, match="conv10_conv_(weight|bias).*allow_extra"):
        internal.bind(args=arg_params, shapes={"data": x.shape})
    features = internal.bind(args=arg_params, shapes={"data": x.shape}, allow_extra=True)
    np.testing.assert_allclose(features.forward(data=x)[0].asnumpy(), np.load(out / "1.npy"),
                               rtol=1e-6, atol=1e-7)
    # The bound weights are the file's arrays, and the data input now holds x.
    np.testing.assert_array_equal(ex.arg_dict["conv1_conv_weight"].asnumpy(),
                                  arg_params["conv1_conv_weight"].asnumpy())
    np.testing.assert_array_equal(ex.arg_dict["data"].asnumpy(), x)


@pytest.mark.skipif(not GLUON_MLP.exists(), reason="bundled models absent")
def test_training_step_matches_cli_replay(tmp_path, rng):
    x = rng.uniform(-1, 1, (4, 20)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    params, grads = tmp_path / "p.params", tmp_path / "g.params"
    out = _replay(GLUON_MLP, tmp_path, "--input", f"data={tmp_path / 'x.npy'}", "--train",
                  "--seed", "11", "--save-params", str(params), "--save-grads", str(grads))
    net = weft.graph.load(GLUON_MLP)
    arg_params, aux_params = weft.graph.load_params(params)
    want_grads = weft.load(grads)
    ex = net.bind(args=arg_params, aux=aux_params, shapes={"data": x.shape},
                  grad_req={name: "write" for name in arg_params})
    y = ex.forward(is_train=True, data=x)[0]
    ex.backward()
    np.testing.assert_allclose(y.asnumpy(), np.load(out / "0.npy"), rtol=1e-6, atol=1e-7)
    assert set(ex.grad_dict) == set(arg_params)
    for name, g in ex.grad_dict.items():
        np.testing.assert_allclose(g.asnumpy(), want_grads[f"grad:{name}"].asnumpy(),
                                   rtol=1e-6, atol=1e-7, err_msg=name)


# ---- composition -------------------------------------------------------------------------------

def test_mlp_listing_and_shapes():
    net = _mlp(hidden=3, classes=2)
    assert net.name == "fc2" and net.op_name == "FullyConnected"
    assert net.list_arguments() == ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    assert net.list_outputs() == ["fc2_output"]
    assert net.list_auxiliary_states() == []
    arg, out, aux = net.infer_shape(data=(4, 5))
    assert arg == [(4, 5), (3, 5), (3,), (2, 3), (2,)]
    assert out == [(4, 2)] and aux == []
    # Positionally, in list_arguments() order, as MXNet takes them.
    assert net.infer_shape((4, 5))[1] == [(4, 2)]
    # Without the data shape only what num_hidden fixes is known (unknowns written as 0, as
    # MXNet does).
    arg, out, _ = net.infer_shape_partial()
    assert arg == [(), (3, 0), (3,), (2, 0), (2,)] and out == [()]
    with pytest.raises(weft.ShapeError, match="data"):
        net.infer_shape()
    arg_t, out_t, _ = net.infer_type(data="float64")
    assert arg_t == [np.dtype("float64")] * 5 and out_t == [np.dtype("float64")]
    assert net.attr("num_hidden") == "2" and net.attr("no_such_key") is None


def test_batchnorm_auxiliary_states_and_internals():
    data = sym.Variable("data")
    conv = sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv")
    bn = sym.BatchNorm(conv, name="bn")
    assert bn.list_arguments() == ["data", "conv_weight", "conv_bias", "bn_gamma", "bn_beta"]
    assert bn.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    assert bn.list_inputs() == ["data", "conv_weight", "conv_bias", "bn_gamma", "bn_beta",
                                "bn_moving_mean", "bn_moving_var"]
    _, out, aux = bn.infer_shape(data=(2, 3, 8, 8))
    assert out == [(2, 4, 8, 8)] and aux == [(4,), (4,)]
    internals = bn.get_internals()
    assert "conv_output" in internals.list_outputs()
    assert internals["conv_output"].name == "conv"
    assert [s.name for s in sym.Group([conv, bn])] == ["conv", "bn"]
    with pytest.raises(IndexError):
        sym.Group([conv, bn])[2]


def test_none_inputs_become_variables_and_attrs():
    data = sym.Variable("data", shape=(0, 6), dtype="float32", lr_mult=0.5)
    assert data.list_attr() == {"__shape__": "(0, 6)", "__dtype__": "0", "__lr_mult__": "0.5"}
    w = sym.Variable("shared_w")
    # A None in the middle is created as <name>_<input>; trailing ones are dropped.
    fc = sym.FullyConnected(data, w, None, num_hidden=4, name="fc", attr={"__wd_mult__": "0"})
    assert fc.list_arguments() == ["data", "shared_w", "fc_bias"]
    assert fc.attr("__wd_mult__") == "0"
    nobias = sym.FullyConnected(data, num_hidden=4, no_bias=True, name="nb")
    assert nobias.list_arguments() == ["data", "nb_weight"]
    with sym.name_scope("blk_"):
        a = sym.Activation(data, act_type="relu")
        b = sym.Activation(a, act_type="relu")
    assert (a.name, b.name) == ("blk_activation0", "blk_activation1")
    with pytest.raises(TypeError, match="Symbol"):
        sym.Activation(np.ones(3), act_type="relu")


def test_json_round_trip_and_forward_against_numpy(rng):
    net = _mlp(hidden=3, classes=2)
    text = net.tojson()
    doc = json.loads(text)
    assert [n["op"] for n in doc["nodes"]].count("FullyConnected") == 2
    again = weft.graph.load_json(text)
    assert again.tojson() == text
    assert again.list_arguments() == net.list_arguments()
    assert pickle.loads(pickle.dumps(net)).tojson() == text

    x = rng.standard_normal((4, 5)).astype(np.float32)
    w1 = rng.standard_normal((3, 5)).astype(np.float32)
    b1 = rng.standard_normal(3).astype(np.float32)
    w2 = rng.standard_normal((2, 3)).astype(np.float32)
    b2 = rng.standard_normal(2).astype(np.float32)
    g = rng.standard_normal((4, 2)).astype(np.float32)
    want, grads = _mlp_reference(x, w1, b1, w2, b2, g)
    args = {"fc1_weight": w1, "fc1_bias": b1, "fc2_weight": w2, "fc2_bias": b2}
    for s in (net, again):
        ex = s.bind(args=args, shapes={"data": x.shape}, grad_req="write")
        (y,) = ex.forward(is_train=True, data=x)
        np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-5, atol=1e-6)
        ex.backward(weft.array(g))
        for name, ref in grads.items():
            np.testing.assert_allclose(ex.grad_dict[name].asnumpy(), ref, rtol=1e-5, atol=1e-5,
                                       err_msg=name)
        # A second run with other data reuses the plan and sees the new input.
        x2 = x[::-1].copy()
        want2, _ = _mlp_reference(x2, w1, b1, w2, b2, g)
        np.testing.assert_allclose(ex.forward(data=x2)[0].asnumpy(), want2, rtol=1e-5, atol=1e-6)


def test_grad_req_add_accumulates_and_null_skips(rng):
    net = _mlp(hidden=3, classes=2)
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(2, 5))[0]))
    vals = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    g = rng.standard_normal((2, 2)).astype(np.float32)
    _, grads = _mlp_reference(vals["data"], vals["fc1_weight"], vals["fc1_bias"],
                              vals["fc2_weight"], vals["fc2_bias"], g)
    ex = net.bind(args=vals, grad_req={"data": "null", "fc1_weight": "add",
                                       "fc1_bias": "write", "fc2_weight": "write",
                                       "fc2_bias": "null"})
    assert set(ex.grad_dict) == {"fc1_weight", "fc1_bias", "fc2_weight"}
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward([weft.array(g)])
    np.testing.assert_allclose(ex.grad_dict["fc1_weight"].asnumpy(), 2 * grads["fc1_weight"],
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ex.grad_dict["fc1_bias"].asnumpy(), grads["fc1_bias"],
                               rtol=1e-5, atol=1e-5)


def test_softmax_output_gradient_against_finite_differences(rng):
    data = sym.Variable("data")
    net = sym.SoftmaxOutput(sym.FullyConnected(data, num_hidden=3, name="fc"), name="softmax")
    assert net.list_arguments() == ["data", "fc_weight", "fc_bias", "softmax_label"]
    x = rng.standard_normal((4, 5))
    w = rng.standard_normal((3, 5))
    b = rng.standard_normal(3)
    label = np.array([0, 2, 1, 2])
    ex = net.bind(args={"fc_weight": w.astype(np.float32), "fc_bias": b.astype(np.float32),
                        "softmax_label": label.astype(np.float32)},
                  shapes={"data": x.shape}, grad_req={"fc_weight": "write"})
    ex.forward(is_train=True, data=x)
    ex.backward()

    def loss(w64):  # the cross-entropy whose gradient SoftmaxOutput writes (summed over rows)
        z = x @ w64.T + b
        z -= z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        return -logp[np.arange(4), label].sum()

    eps = 1e-6
    fd = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        d = np.zeros_like(w)
        d[idx] = eps
        fd[idx] = (loss(w + d) - loss(w - d)) / (2 * eps)
    np.testing.assert_allclose(ex.grad_dict["fc_weight"].asnumpy(), fd, rtol=1e-4, atol=1e-5)


def test_symbol_arithmetic_against_numpy(rng):
    a, b = sym.Variable("a"), sym.Variable("b")
    expr = sym.Group([(a + b) * 2 - a / b, 1 - a, 3 / b, -a + 0.5, a ** 2, 2 ** a])
    av = rng.uniform(0.5, 1.5, (2, 3)).astype(np.float32)
    bv = rng.uniform(0.5, 1.5, (2, 3)).astype(np.float32)
    ex = expr.bind(args={"a": av, "b": bv})
    got = [o.asnumpy() for o in ex.forward()]
    a64, b64 = av.astype(np.float64), bv.astype(np.float64)
    want = [(a64 + b64) * 2 - a64 / b64, 1 - a64, 3 / b64, -a64 + 0.5, a64 ** 2, 2 ** a64]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"output {k}")


def test_reshape_and_bundled_model():
    assert {"mlp", "resnet18", "mobilenetv2"} <= set(weft.graph.model_names())
    net, shapes = weft.model("mlp", batch=2)
    assert shapes == {"data": (2, 784), "softmax_label": (2,)}
    ex = net.bind(shapes=shapes)
    assert ex.output_shapes == [(2, 10)]
    assert net.simple_bind(grad_req="write", **shapes).output_shapes == [(2, 10)]
    # Zero weights: every class equally likely.
    np.testing.assert_allclose(ex.forward(data=np.ones((2, 784)))[0].asnumpy(),
                               np.full((2, 10), 0.1), rtol=1e-6)
    assert ex.reshape(data=(5, 784)) is ex
    assert ex.output_shapes == [(5, 10)] and ex.arg_dict["data"].shape == (5, 784)
    assert ex.forward(data=np.ones((5, 784)))[0].shape == (5, 10)
    resnet, rs = weft.model("resnet18", batch=3)
    _, out, aux = resnet.infer_shape(**rs)
    assert out == [(3, 1000)] and len(aux) == 2 * len([n for n in resnet.list_arguments()
                                                       if n.endswith("_gamma")])


def _py_square_op():
    name = "test_graph_py_square"
    if not weft._weft._has_op(name):
        weft.register_op(name, lambda x: x * x,
                         backward=lambda out_grads, inputs, outputs: [2 * inputs[0] * out_grads[0]])
    return getattr(sym, name)


def test_python_operator_in_a_graph_and_threads(rng):
    # The operator runs on engine workers and takes the GIL: binding, running, reshaping and
    # dropping the executor must all release it while they wait.
    square = _py_square_op()
    data = sym.Variable("data")
    net = square(sym.FullyConnected(data, num_hidden=3, name="fc")) * 2
    w = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    ex = net.bind(args={"fc_weight": w, "fc_bias": np.zeros(3, np.float32)},
                  shapes={"data": x.shape}, grad_req={"fc_weight": "write"})
    ex.forward(is_train=True, data=x)
    ex.backward()
    z = x.astype(np.float64) @ w.T
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), 2 * z * z, rtol=1e-5)
    np.testing.assert_allclose(ex.grad_dict["fc_weight"].asnumpy(), (4 * z).T @ x, rtol=1e-5)

    infer = net.bind(args={"fc_weight": w, "fc_bias": np.zeros(3, np.float32)},
                     shapes={"data": x.shape})
    infer.forward(data=x)
    infer.reshape(data=(5, 4))  # waits for the run above
    x5 = rng.standard_normal((5, 4)).astype(np.float32)
    z5 = x5.astype(np.float64) @ w.T
    # Several Python threads share the executor; each run sees the same input.
    errors = []

    def run():
        try:
            for _ in range(10):
                infer.forward(data=x5)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    np.testing.assert_allclose(infer.outputs[0].asnumpy(), 2 * z5 * z5, rtol=1e-5)
    infer.forward(data=x5)
    del infer, ex  # destruction waits for the last run
    weft.waitall()


# ---- parameter files ---------------------------------------------------------------------------

def test_save_and_load_params_round_trip(tmp_path, rng):
    arg = {"fc_weight": weft.array(rng.standard_normal((3, 4)).astype(np.float32)),
           "embed": weft.array(rng.integers(0, 9, (5,)).astype(np.int32))}
    aux = {"bn_moving_var": weft.array(rng.uniform(0.5, 1, 4).astype(np.float64))}
    path = tmp_path / "net-0003.params"
    weft.graph.save_params(path, arg, aux)
    raw = weft.load(path)
    assert sorted(raw) == ["arg:embed", "arg:fc_weight", "aux:bn_moving_var"]
    arg2, aux2 = weft.graph.load_params(path)
    for want, got in ((arg, arg2), (aux, aux2)):
        assert set(want) == set(got)
        for k in want:
            assert got[k].dtype == want[k].dtype
            np.testing.assert_array_equal(got[k].asnumpy(), want[k].asnumpy())
    # Lists, and .npy files that NumPy itself reads and writes.
    weft.save(tmp_path / "list.params", [arg["fc_weight"], aux["bn_moving_var"]])
    listed = weft.load(tmp_path / "list.params")
    assert isinstance(listed, list) and len(listed) == 2
    np.testing.assert_array_equal(listed[1].asnumpy(), aux["bn_moving_var"].asnumpy())
    weft.save(tmp_path / "w.npy", arg["fc_weight"])
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), arg["fc_weight"].asnumpy())
    np.save(tmp_path / "n.npy", np.arange(6, dtype=np.int64).reshape(2, 3))
    np.testing.assert_array_equal(weft.load(tmp_path / "n.npy").asnumpy(),
                                  np.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match="list of 2"):
        weft.graph.load_params(tmp_path / "list.params")


@pytest.mark.skipif(not MXNET_PYTHON.exists(), reason="MXNet 1.9.1 (/work/mxvenv) absent")
def test_mxnet_reads_what_weft_wrote(tmp_path, rng):
    data = sym.Variable("data")
    conv = sym.Convolution(data, num_filter=4, kernel=(3, 3), name="conv")
    bn = sym.BatchNorm(conv, fix_gamma=False, name="bn")
    net = sym.FullyConnected(sym.Activation(bn, act_type="relu", name="relu"), num_hidden=3,
                             name="fc")
    x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    arg_shapes, _, aux_shapes = net.infer_shape(data=x.shape)
    arg = {n: weft.array(rng.standard_normal(s).astype(np.float32))
           for n, s in zip(net.list_arguments(), arg_shapes) if n != "data"}
    aux = {n: weft.array(rng.uniform(0.5, 1.5, s).astype(np.float32))
           for n, s in zip(net.list_auxiliary_states(), aux_shapes)}
    weft.graph.save_checkpoint(tmp_path / "net", 7, net, arg, aux)
    np.save(tmp_path / "x.npy", x)
    want = net.bind(args=arg, aux=aux, shapes={"data": x.shape}).forward(data=x)[0].asnumpy()

    script = textwrap.dedent(f"""
        import mxnet as mx, numpy as np
        prefix = {str(tmp_path / 'net')!r}
        sym = mx.sym.load(prefix + "-symbol.json")
        params = mx.nd.load(prefix + "-0007.params")
        arg = {{k[4:]: v for k, v in params.items() if k.startswith("arg:")}}
        aux = {{k[4:]: v for k, v in params.items() if k.startswith("aux:")}}
        assert sym.list_arguments() == {net.list_arguments()!r}, sym.list_arguments()
        assert sym.list_auxiliary_states() == {net.list_auxiliary_states()!r}
        x = mx.nd.array(np.load({str(tmp_path / 'x.npy')!r}))
        ex = sym.bind(mx.cpu(), dict(arg, data=x), aux_states=aux, grad_req="null")
        np.save({str(tmp_path / 'mx.npy')!r}, ex.forward(is_train=False)[0].asnumpy())
    """)
    run = subprocess.run([str(MXNET_PYTHON), "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "mx.npy"), want, rtol=1e-4, atol=1e-5)


# ---- errors ------------------------------------------------------------------------------------

def test_errors_name_the_problem_and_the_process_goes_on(tmp_path):
    doc = json.loads(_mlp().tojson())
    doc["nodes"][3]["op"] = "NoSuchOperator"
    with pytest.raises(ValueError, match="NoSuchOperator"):
        sym.load_json(json.dumps(doc))
    with pytest.raises(ValueError, match="not valid|JSON|json"):
        sym.load_json("{ this is not json")
    with pytest.raises(ValueError, match="missing.json"):
        weft.graph.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="nothing.params"):
        weft.graph.load_params(tmp_path / "nothing.params")

    net = _mlp(hidden=3, classes=2)
    w1 = np.zeros((3, 5), np.float32)
    # A bound weight that disagrees with the data shape given.
    with pytest.raises(weft.ShapeError, match="fc1"):
        net.bind(args={"fc1_weight": w1}, shapes={"data": (4, 6)})
    with pytest.raises(ValueError, match="'label'.*arguments: data, fc1_weight"):
        net.bind(shapes={"data": (4, 5), "label": (4,)})
    with pytest.raises(ValueError, match="'fc9_weight'"):
        net.bind(args={"fc9_weight": w1}, shapes={"data": (4, 5)})
    with pytest.raises(ValueError, match="grad_req 'sometimes'"):
        net.bind(shapes={"data": (4, 5)}, grad_req="sometimes")

    ex = net.bind(args={"fc1_weight": w1}, shapes={"data": (4, 5)})
    with pytest.raises(ValueError, match="'date' is not an argument.*data"):
        ex.forward(date=np.ones((4, 5)))
    with pytest.raises(weft.ShapeError, match=r"'data' has shape \(4, 6\).*\(4, 5\)"):
        ex.forward(data=np.ones((4, 6)))
    with pytest.raises(ValueError, match="without gradients"):
        ex.backward()
    with pytest.raises(ValueError, match="fc3_output.*fc2_output"):
        net.get_internals()["fc3_output"]

    # Nothing above broke the engine or the symbol: the same executor still runs.
    out = ex.forward(data=np.ones((4, 5)))[0].asnumpy()
    np.testing.assert_array_equal(out, np.zeros((4, 2), np.float32))
    weft.waitall()


def _conv3x3_reference(x, w, b):
    """Cross-correlation with pad 1 in float64: x (N, C, H, W), w (F, C, 3, 3)."""
    n, c, h, wd = x.shape
    xp = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,fc->nfhw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("layouts,bulk", [(True, 16), (False, 16), (True, 1), (False, 1)])
def test_bind_layouts_and_bulk_against_numpy(rng, layouts, bulk):
    # conv -> relu -> conv (+ the first relu) -> relu -> 2x2 max pool: the inference rewrite
    # fuses the residual add; layouts keep oneDNN's formats between the ops; bulk pushes the
    # chain as one engine operation. Every combination gives the float64 reference.
    data = sym.Variable("data")
    c1 = sym.Convolution(data, num_filter=12, kernel=(3, 3), pad=(1, 1), name="c1")
    r1 = sym.Activation(c1, act_type="relu", name="r1")
    c2 = sym.Convolution(r1, num_filter=12, kernel=(3, 3), pad=(1, 1), name="c2")
    r2 = sym.Activation(c2 + r1, act_type="relu", name="r2")
    net = sym.Pooling(r2, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    x = rng.standard_normal((2, 5, 8, 8)).astype(np.float32)
    w1 = (0.3 * rng.standard_normal((12, 5, 3, 3))).astype(np.float32)
    b1 = rng.standard_normal(12).astype(np.float32)
    w2 = (0.2 * rng.standard_normal((12, 12, 3, 3))).astype(np.float32)
    b2 = rng.standard_normal(12).astype(np.float32)
    h1 = np.maximum(_conv3x3_reference(x, w1, b1), 0)
    h2 = np.maximum(_conv3x3_reference(h1, w2, b2) + h1, 0)
    want = h2.reshape(2, 12, 4, 2, 4, 2).max(axis=(3, 5))
    ex = net.bind(args={"c1_weight": w1, "c1_bias": b1, "c2_weight": w2, "c2_bias": b2},
                  shapes={"data": x.shape}, layouts=layouts, bulk=bulk)
    for _ in range(2):
        (y,) = ex.forward(data=x)
        np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="bulk"):
        net.bind(shapes={"data": x.shape}, bulk=0)
