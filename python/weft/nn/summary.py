"""The model summary: layers, output shapes and parameter counts."""
from __future__ import annotations

import re

import numpy as np

from .shapes import input_shapes


def _output_name(layer, outputs):
    pattern = re.compile(rf"^{re.escape(layer.name)}(_[A-Za-z0-9]+)*_output\d*$")
    hits = [i for i, n in enumerate(outputs) if pattern.match(n)]
    return hits[-1] if hits else None


def summary(model, inputs, params=None):
    """A table (a string): each leaf layer in order with its output shape (None where the input's
    dimension was deferred) and parameter count, then the totals. ``params`` gives the counts
    (default: shapes inferred from ``inputs``)."""
    shapes = input_shapes(inputs)
    sym = model.symbol(len(shapes))
    names = model.input_names(len(shapes))
    concrete = {n: tuple(1 if not d else int(d) for d in s) for n, s in zip(names, shapes)}
    deferred_batch = any(not s[0] for s in shapes if s)
    internals = sym.get_internals()
    _, out_shapes, _ = internals.infer_shape(**concrete)
    out_names = internals.list_outputs()
    arg_shapes, _, aux_shapes = sym.infer_shape(**concrete)
    sizes = {n: int(np.prod(s)) for n, s in zip(sym.list_arguments(), arg_shapes)
             if n not in concrete}
    aux = {n: int(np.prod(s)) for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    if params is not None:
        sizes = {n: int(np.prod(v.shape)) for n, v in params.trainable().items()}
        aux = {n: int(np.prod(v.shape)) for n, v in params.auxiliary().items()}

    rows = []
    for layer in model.walk():
        if layer.children():
            continue
        i = _output_name(layer, out_names)
        shape = "-" if i is None else tuple(out_shapes[i])
        if shape != "-" and deferred_batch:
            shape = (None, *shape[1:])
        count = sum(v for n, v in sizes.items() if n.startswith(layer.name + "_")
                    and re.fullmatch(r"[A-Za-z_]+", n[len(layer.name) + 1:]))
        rows.append((f"{layer.name} ({type(layer).__name__})", str(shape), f"{count:,}"))
    head = ("Layer (type)", "Output shape", "Params")
    w = [max(len(r[k]) for r in rows + [head]) for k in range(3)]
    line = "-" * (sum(w) + 4)
    out = [f"{head[0]:<{w[0]}}  {head[1]:<{w[1]}}  {head[2]:>{w[2]}}", line]
    out += [f"{a:<{w[0]}}  {b:<{w[1]}}  {c:>{w[2]}}" for a, b, c in rows]
    out += [line, f"Trainable parameters: {sum(sizes.values()):,}",
            f"Non-trainable (auxiliary) states: {sum(aux.values()):,}"]
    return "\n".join(out)
