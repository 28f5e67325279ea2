"""The operator schema that weft.op and weft.sym are generated from: typed defaults agree with the
registry's own text, the JSON form (what the C ABI's weft_op_schema gives) agrees with the dict,
and input names come from the schema."""
import inspect
import json
import math
import re

import weft

_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$|^-?inf$|^nan$")


def _text_value(text):
    """An independent reading of a default's text (the rules the generator used before the
    schema typed its defaults): numbers, booleans, None, tuples, else the string."""
    t = text.strip()
    if t in ("None", ""):
        return None
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    if t.startswith("(") or t.startswith("["):
        body = t[1:-1].strip().rstrip(",")
        return tuple(_text_value(p) for p in body.split(",")) if body else ()
    return t.strip("'\"")


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_typed_defaults_agree_with_the_registry_text():
    checked = 0
    for desc in weft._weft._list_ops():
        for p in desc["params"]:
            if p["required"]:
                assert p["default"] is None
                continue
            typed, text = p["default"], p["default_text"]
            if p["type"] in ("string", "dtype") or p["type"].startswith("{"):
                # Strings stay strings, even when they look like numbers.
                assert typed is None or isinstance(typed, str), (desc["name"], p)
                if typed is not None:
                    assert typed == text.strip("'\""), (desc["name"], p)
                continue
            expected = _text_value(text)
            if isinstance(typed, tuple) and not isinstance(expected, tuple):
                expected = (expected,)  # a bare number is a one-element tuple, as the parser reads it
            assert _same(typed, expected), (desc["name"], p["name"], typed, text)
            checked += 1
    assert checked > 100


def test_signatures_carry_the_typed_defaults():
    conv = inspect.signature(weft.op.Convolution).parameters
    assert conv["stride"].default == () and isinstance(conv["stride"].default, tuple)
    assert conv["num_group"].default == 1 and isinstance(conv["num_group"].default, int)
    fc = inspect.signature(weft.op.FullyConnected).parameters
    assert list(fc)[:3] == ["data", "weight", "bias"]
    assert fc["flatten"].default is True
    bn = inspect.signature(weft.op.BatchNorm).parameters
    assert list(bn)[:5] == ["data", "gamma", "beta", "moving_mean", "moving_var"]
    assert bn["eps"].default == 0.001
    rnn = inspect.signature(weft.op.RNN).parameters
    assert list(rnn)[:5] == ["data", "parameters", "state", "state_cell", "sequence_length"]
    stack = inspect.signature(weft.sym.stack).parameters
    assert stack["data"].kind is inspect.Parameter.VAR_POSITIONAL


def test_schema_json_agrees_with_the_generator_dict():
    for name in ("Convolution", "Concat", "BatchNorm", "Pooling", "SliceChannel"):
        desc = weft.op.describe(name)
        j = json.loads(weft._weft._op_schema_json(name))
        assert j["name"] == desc["name"] == name
        assert j["inputs"] == desc["inputs"]
        assert j["variadic"] == desc["variadic"]
        # Unknown counts (null) are one visible output for the generated stubs.
        assert (j["num_visible_outputs"] or 1) == desc["num_visible_outputs"]
        for pj, pd in zip(j["params"], desc["params"], strict=True):
            assert pj["name"] == pd["name"] and pj["required"] == pd["required"]
            d = tuple(pj["default"]) if isinstance(pj["default"], list) else pj["default"]
            assert _same(d, pd["default"]), (name, pj, pd)
    assert weft.op.describe("Concat")["variadic"] == "num_args"
    assert "output_mean_var" in weft.op.describe("BatchNorm")["outputs_depend_on"]
    everything = json.loads(weft._weft._op_schema_json())
    assert {"Convolution", "Concat"} <= {d["name"] for d in everything}


def test_one_entry_point_parses_repeated_attributes_once():
    # The same attributes on every call, and different ones, through the one entry point.
    x = weft.array([[1.0, -2.0], [3.0, -4.0]])
    for _ in range(3):
        y = weft.op.clip(x, a_min=-1.0, a_max=1.0)
    assert y.asnumpy().tolist() == [[1.0, -1.0], [1.0, -1.0]]
    z = weft.op.clip(x, a_min=0.0, a_max=2.0)
    assert z.asnumpy().tolist() == [[1.0, 0.0], [2.0, 0.0]]
    (w,) = weft._weft._invoke("_plus_scalar", [x], {"scalar": 1})
    assert w.asnumpy().tolist() == [[2.0, -1.0], [4.0, -3.0]]
    out = weft.zeros((2, 2))
    assert weft.op.elemwise_add(x, x, out=out) is out
    assert out.asnumpy().tolist() == [[2.0, -4.0], [6.0, -8.0]]
