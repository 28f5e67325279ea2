"""Shared fixtures of weft's Python tests."""
import numpy as np
import pytest

import weft


@pytest.fixture
def rng():
    """A seeded NumPy generator: each test draws the same values on every run."""
    return np.random.default_rng(20240613)


@pytest.fixture(autouse=True)
def _engine_clean():
    """Each test starts with no unobserved engine failure and must leave none behind: a failure
    that a test did not expect is reported by the waitall after it."""
    try:
        weft.waitall()
    except weft.EngineError:
        pass
    recording, training = weft.autograd.is_recording(), weft.autograd.is_training()
    yield
    assert weft.autograd.is_recording() == recording, "a test left autograd recording changed"
    assert weft.autograd.is_training() == training, "a test left the training flag changed"
    weft.waitall()
