#!/usr/bin/env bash
# Checks (or with --fix, applies) the house .clang-format on every tracked C/C++/CUDA source.
# Exits non-zero and lists the files that differ when run without --fix.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check_format: $clang_format not found (Debian: apt-get install clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.hpp' '*.cu' '*.cuh' '*.c')
if [ "${1:-}" = "--fix" ]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format ($("$clang_format" --version)):"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: scripts/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files match .clang-format"
