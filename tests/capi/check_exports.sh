#!/usr/bin/env bash
# Checks that a weft C library exports the C ABI's functions and nothing else (no C++ symbols
# that could collide with another copy of weft or of its dependencies in the same process).
set -euo pipefail
lib="${1:?usage: check_exports.sh libweft_c.so}"
exported="$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^$' | sort -u)"
others="$(grep -v '^weft_' <<<"$exported" | grep -v -E '^(WEFT_C_1|_init|_fini|_edata|_end|__bss_start)$' || true)"
count="$(grep -c '^weft_' <<<"$exported" || true)"
if [ -n "$others" ]; then
  echo "check_exports: $lib exports symbols outside the C ABI:" >&2
  head -20 <<<"$others" >&2
  exit 1
fi
if [ "$count" -lt 40 ]; then
  echo "check_exports: $lib exports only $count weft_* functions; expected the whole C ABI" >&2
  exit 1
fi
echo "check_exports: $count weft_* functions, nothing else"
