"""Generates Python functions for registered operators from the registry's operator schema
(ops/op_schema.h, through _weft._describe_op: input names, typed defaults, variadic inputs): one
function per operator (and alias) with its inputs, parameters, defaults and documentation.
weft.op builds array functions with it, weft.sym symbol functions."""
from __future__ import annotations

import inspect
import keyword


def _py_name(name):
    return name + "_" if keyword.iskeyword(name) else name


def input_names(desc):
    names = desc.get("inputs")
    if desc.get("variadic"):
        return None
    if names is None:
        return ["data"]
    return list(names)


def signature(desc, extra):
    """inspect.Signature: inputs (positional), then parameters (keyword-only), then `extra`."""
    params = []
    names = input_names(desc)
    if names is None:
        params.append(inspect.Parameter("data", inspect.Parameter.VAR_POSITIONAL))
    else:
        for n in names:
            params.append(inspect.Parameter(_py_name(n), inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=None))
    seen = {p.name for p in params}
    for p in desc["params"]:
        n = _py_name(p["name"])
        if n in seen or p["name"] == "num_args" and names is None:
            continue
        seen.add(n)
        # The schema types the default (a tuple for a shape, None for "None").
        default = inspect.Parameter.empty if p["required"] else p["default"]
        params.append(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=default))
    for n, d in extra:
        if n not in seen:
            params.append(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d))
    return inspect.Signature(params)


def docstring(desc, kind):
    lines = [desc["description"] or f"The {desc['name']} operator.", ""]
    names = input_names(desc)
    lines.append("Inputs:")
    if names is None:
        lines.append(f"    *data: {kind} (any number; num_args is set from them)")
    else:
        for n in names:
            lines.append(f"    {n}: {kind}")
    if desc["params"]:
        lines.append("")
        lines.append("Parameters:")
        for p in desc["params"]:
            d = "required" if p["required"] else f"default {p['default_text']}"
            text = f"    {p['name']} ({p['type']}, {d})"
            if p["description"]:
                text += f": {p['description']}"
            lines.append(text)
    if desc.get("aliases"):
        lines.append("")
        lines.append("Aliases: " + ", ".join(desc["aliases"]))
    lines.append("")
    lines.append("Gradient: " + ("yes" if desc.get("has_gradient") else "no") + ". Kernels: " +
                 ", ".join(k for k in ("cpu", "cuda") if desc.get(k)) + ".")
    return "\n".join(lines)


def make_function(desc, apply, kind, extra=(("out", None), ("name", None))):
    """A function for operator `desc` calling apply(op_name, inputs, attrs, **extra_values).

    Inputs are taken positionally or by name; trailing None inputs are left out (an op's
    optional inputs, such as bias with no_bias=True). Attributes left at None are not sent, so
    the operator's own default applies.

    The function is generated from source with the operator's input names as its parameters, so
    Python itself binds the arguments: a call costs little more than apply() (a training loop
    calls these per operator)."""
    op_name = desc["name"]
    names = input_names(desc)
    extra_names = [n for n, _ in extra]
    keyword_params = [p["name"] for p in desc["params"] if keyword.iskeyword(p["name"])]
    fname = _py_name(op_name)
    if not fname.isidentifier():
        fname = "op_function"
    extras_sig = ", ".join(f"{n}=None" for n in extra_names)
    extras_call = ", ".join(f"{n}={n}" for n in extra_names)
    lines = []
    if names is None:
        lines.append(f"def {fname}(*data, {extras_sig}, **attrs):")
        lines.append("    inputs = list(data)")
        # The documented rule for variadic operators: num_args counts the inputs given.
        lines.append("    if 'num_args' not in attrs:")
        lines.append("        attrs['num_args'] = len(inputs)")
    else:
        py_names = [_py_name(n) for n in names]
        clash = set(py_names) & set(extra_names)
        if clash:
            raise ValueError(f"operator {op_name}: input names {sorted(clash)} clash with "
                             f"{extra_names}")
        params = ", ".join(f"{n}=None" for n in py_names)
        lines.append(f"def {fname}({params + ', ' if params else ''}*, {extras_sig}, **attrs):")
        lines.append(f"    inputs = [{', '.join(py_names)}]")
        if py_names:
            lines.append("    while inputs and inputs[-1] is None:")
            lines.append("        inputs.pop()")
    if keyword_params:
        # Parameters spelt like Python keywords are passed with a trailing underscore.
        lines.append("    for k in [k for k in attrs if k.endswith('_') and "
                     "k[:-1] in _KEYWORD_PARAMS]:")
        lines.append("        attrs[k[:-1]] = attrs.pop(k)")
    lines.append(f"    return _apply(_OP, inputs, attrs, {extras_call})")
    scope = {"_apply": apply, "_OP": op_name, "_KEYWORD_PARAMS": set(keyword_params)}
    exec(compile("\n".join(lines), f"<weft operator {op_name}>", "exec"), scope)  # noqa: S102
    fn = scope[fname]
    fn.__name__ = _py_name(op_name)
    fn.__qualname__ = fn.__name__
    fn.__doc__ = docstring(desc, kind)
    fn.__signature__ = signature(desc, extra)
    return fn


def stub(desc, kind, extra):
    """A .pyi line for the function of `desc`."""
    sig = signature(desc, extra)
    parts = []
    star_done = False
    for p in sig.parameters.values():
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            parts.append(f"*{p.name}: {kind}")
            star_done = True
            continue
        if p.kind == inspect.Parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD:
            parts.append(f"{p.name}: {kind} | None = None")
        elif p.default is inspect.Parameter.empty:
            parts.append(f"{p.name}: Any")
        else:
            parts.append(f"{p.name}: Any = {p.default!r}")
    ret = kind if desc.get("num_visible_outputs", 1) == 1 else f"list[{kind}]"
    doc = (desc["description"] or "").replace('"""', "'''").strip()
    body = f'    """{doc}"""' if doc else "    ..."
    return f"def {_py_name(desc['name'])}({', '.join(parts)}) -> {ret}:\n{body}\n"
