"""Writes op.pyi and sym.pyi (type stubs of weft.op and weft.sym) from the operator registry of
the built extension. Run by the build: gen_op_stubs.py OUTPUT_DIR, with the extension on
PYTHONPATH."""
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("_opgen", os.path.join(here, "weft", "_opgen.py"))
_opgen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_opgen)

import _weft  # noqa: E402  (the built extension, from PYTHONPATH)

HEADER = '''# Generated from the operator registry by python/gen_op_stubs.py; do not edit.
import builtins
from typing import Any

from ._weft import NDArray
{extra_import}
'''


def write(path, kind, extra, extra_import=""):
    descs = _weft._list_ops()
    with open(path, "w") as f:
        f.write(HEADER.format(extra_import=extra_import))
        f.write("def refresh() -> None: ...\n")
        f.write("def list() -> builtins.list[str]: ...\n")
        f.write("def describe(name: str) -> dict[str, Any]: ...\n\n")
        for d in descs:
            for n in [d["name"], *d.get("aliases", [])]:
                f.write(_opgen.stub({**d, "name": n}, kind, extra))
                f.write("\n")


out = sys.argv[1]
write(os.path.join(out, "op.pyi"), "NDArray", (("out", None), ("name", None)))
write(os.path.join(out, "sym.pyi"), "Symbol", (("name", None), ("attr", None)),
      "from ._weft import Symbol\n")
