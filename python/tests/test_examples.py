"""The Python examples run end to end: the MLP learns (accuracy well above chance after one epoch,
the loss curve written), and the replay prints a top-5 and writes a trace."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def run(args, tmp_path):
    # The same interpreter and environment (a development build's WEFT_NATIVE_DIR/PYTHONPATH
    # included), from a folder outside the repository.
    return subprocess.run([sys.executable, *map(str, args)], cwd=tmp_path, env=dict(os.environ),
                          capture_output=True, text=True, timeout=300, check=True).stdout


def test_mlp_example_learns(tmp_path):
    out = run([EXAMPLES / "mlp_train.py", "--epochs", "2", "--train-size", "6000",
               "--test-size", "500", "--out", tmp_path], tmp_path)
    before = float(re.search(r"before training: test accuracy ([\d.]+)%", out).group(1))
    after = [float(a) for a in re.findall(r"loss [\d.]+\s+test accuracy ([\d.]+)%", out)]
    assert before < 25 and after, out
    # Seeded: 48.8% then 58.8% (chance is 10%).
    assert after[-1] > 45 and after[-1] > after[0] > before + 20, out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib" in out
    else:
        png = tmp_path / "mlp_loss.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_replay_example_prints_top5_and_writes_a_trace(tmp_path):
    trace = tmp_path / "trace.json"
    out = run([EXAMPLES / "replay_model.py", "mlp", "--iters", "2", "--profile", trace], tmp_path)
    probs = [float(p) for p in re.findall(r"^\s+\d\. class\s+\d+\s+([\d.]+)$", out, re.M)]
    assert len(probs) == 5 and probs == sorted(probs, reverse=True) and sum(probs) <= 1.0 + 1e-6
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "FullyConnected" or "FullyConnected" in str(e.get("name"))
               for e in events), [e.get("name") for e in events][:20]


def test_replay_example_rejects_an_unknown_model(tmp_path):
    with pytest.raises(subprocess.CalledProcessError) as e:
        run([EXAMPLES / "replay_model.py", "no_such_model"], tmp_path)
    assert "unknown model 'no_such_model'" in e.value.stderr
