"""Recurrent layers on the fused RNN operator: one flat parameter vector per layer
(``<name>_parameters``, MXNet's packing: every layer's and direction's input-to-hidden then
hidden-to-hidden weights, then the biases) and zero initial states made from the input, so the
layer traces and hybridizes with a deferred batch."""
from __future__ import annotations

import math

from .. import zeros
from .init import Uniform
from .layer import Layer

__all__ = ["RNN", "LSTM", "GRU"]


class _Recurrent(Layer):
    _mode = "rnn_tanh"
    _states = 1

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0.0,
                 bidirectional=False, return_states=False, name=None):
        super().__init__(name)
        if layout not in ("TNC", "NTC"):
            raise ValueError(f"{type(self).__name__}: layout '{layout}': expected TNC or NTC")
        self.hidden_size, self.num_layers = int(hidden_size), int(num_layers)
        self.layout, self.dropout = layout, float(dropout)
        self.bidirectional, self.return_states = bool(bidirectional), bool(return_states)

    def param_inits(self):
        return {"parameters": Uniform(1.0 / math.sqrt(self.hidden_size))}

    def _begin_state(self, ctx, x):
        n_dir = 2 if self.bidirectional else 1
        rows = self.num_layers * n_dir
        if not ctx.symbolic:
            return zeros((rows, x.shape[1], self.hidden_size), dtype=x.dtype, device=x.device)
        # (T, N, C) -> (1, N, 1) zeros -> (rows, N, H): the batch stays deferred in the graph.
        s = ctx.op(self, "slice_axis", x, axis=0, begin=0, end=1, suffix="_state_t")
        s = ctx.op(self, "slice_axis", s, axis=2, begin=0, end=1, suffix="_state_c")
        s = ctx.op(self, "zeros_like", s, suffix="_state_zero")
        return ctx.op(self, "tile", s, reps=(rows, 1, self.hidden_size), suffix="_state")

    def forward(self, ctx, x):
        if self.layout == "NTC":
            x = ctx.op(self, "transpose", x, axes=(1, 0, 2), suffix="_in_tnc")
        states = [self._begin_state(ctx, x)]
        if self._states == 2:  # the LSTM's cell state: zeros of the same shape, its own node
            states.append(ctx.op(self, "zeros_like", states[0], suffix="_cell_state")
                          if ctx.symbolic else states[0].copy())
        outs = ctx.op(self, "RNN", x, ctx.param(self, "parameters"), *states,
                      state_size=self.hidden_size, num_layers=self.num_layers,
                      bidirectional=self.bidirectional, mode=self._mode, p=self.dropout,
                      state_outputs=self.return_states)
        if self.return_states:
            out, rest = outs[0], tuple(outs[i] for i in range(1, 1 + self._states))
        else:
            out, rest = outs, ()
        if self.layout == "NTC":
            out = ctx.op(self, "transpose", out, axes=(1, 0, 2), suffix="_out_ntc")
        return (out, *rest) if self.return_states else out

    def _describe(self):
        return (f"{self.hidden_size}, num_layers={self.num_layers}, layout={self.layout!r}"
                + (", bidirectional=True" if self.bidirectional else ""))


class RNN(_Recurrent):
    """An Elman network with ``activation`` 'tanh' or 'relu'. Input (T, N, C) with layout TNC
    (or (N, T, C) with NTC); output (T, N, D*hidden_size). ``return_states`` also returns the
    final hidden state (num_layers*D, N, hidden_size)."""

    prefix = "rnn"

    def __init__(self, hidden_size, num_layers=1, activation="tanh", layout="TNC", dropout=0.0,
                 bidirectional=False, return_states=False, name=None):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, return_states,
                         name)
        if activation not in ("tanh", "relu"):
            raise ValueError(f"RNN: activation '{activation}': expected tanh or relu")
        self._mode = f"rnn_{activation}"


class LSTM(_Recurrent):
    """A long short-term memory network (gates i, f, g, o). ``return_states`` also returns the
    final hidden and cell states."""

    prefix = "lstm"
    _mode = "lstm"
    _states = 2


class GRU(_Recurrent):
    """A gated recurrent unit network (gates r, z, n)."""

    prefix = "gru"
    _mode = "gru"
