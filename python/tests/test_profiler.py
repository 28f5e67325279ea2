"""weft.profiler: a Chrome trace of the operations run between start() and stop(path)."""
import json

import numpy as np
import pytest

import weft


def _op_events(path):
    with open(path) as f:
        trace = json.load(f)
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "op"]


def test_start_stop_writes_a_chrome_trace(tmp_path):
    x = weft.ones((32, 32))
    early = x.exp()  # before start(): not in the trace
    early.wait_to_read()
    weft.profiler.start()
    y = weft.op.softmax((x @ x).relu(), axis=-1)
    z = weft.op.Pooling(y.reshape(1, 1, 32, 32), kernel=(2, 2), stride=(2, 2))
    path = tmp_path / "trace.json"
    n = weft.profiler.stop(path)
    assert n > 0
    events = _op_events(path)
    names = {e["name"] for e in events}
    assert {"dot", "relu", "softmax", "Pooling"} <= names
    assert "exp" not in names
    for e in events:
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert e["args"]["device"] == "cpu:0"
    # stop() waited for the work it traced.
    assert z._version == 1
    assert z.shape == (1, 1, 16, 16)


def test_nothing_recorded_after_stop(tmp_path):
    weft.profiler.start()
    (weft.ones(4) * 2).wait_to_read()
    weft.profiler.stop(tmp_path / "a.json")
    (weft.ones(4).sin()).wait_to_read()  # after stop
    weft.profiler.start()
    (weft.ones(4) + 3).wait_to_read()
    weft.profiler.stop(tmp_path / "b.json")
    a = {e["name"] for e in _op_events(tmp_path / "a.json")}
    b = {e["name"] for e in _op_events(tmp_path / "b.json")}
    assert "_mul_scalar" in a and "sin" not in a
    # start() drops the events of the earlier run.
    assert "_plus_scalar" in b and "_mul_scalar" not in b and "sin" not in b


def test_profile_scope(tmp_path):
    path = tmp_path / "scope.json"
    with weft.profiler.profile(str(path)):
        weft.op.tanh(weft.ones((8, 8)))
    assert "tanh" in {e["name"] for e in _op_events(path)}


def test_stop_without_path_returns_the_count():
    weft.profiler.start()
    for _ in range(3):
        weft.ones(2) * 3.0
    assert weft.profiler.stop() >= 3


def test_stop_stops_even_when_an_operation_failed(tmp_path):
    weft.profiler.start()
    x = weft.zeros((2, 3), dtype="float64")
    x.attach_grad()
    with weft.autograd.record():
        y = weft.op.SoftmaxOutput(x, weft.array(np.array([0.0, 9.0])))
    y.backward()  # the backward kernel fails: label 9 of 3 classes
    path = tmp_path / "failed.json"
    with pytest.raises(weft.EngineError):
        weft.profiler.stop(path)
    names = {e["name"] for e in _op_events(path)}
    assert "_backward_SoftmaxOutput" in names
    # Stopped: later operations are not recorded.
    count = weft.profiler.stop()
    (weft.ones(3) * 5).wait_to_read()
    assert weft.profiler.stop() == count
