#!/usr/bin/env bash
# Fails if any C++ source differs from .clang-format (fix with: scripts/check-format.sh --fix).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cpp' '*.cu' '*.cuh')
((${#files[@]})) || exit 0
if [[ ${1:-} == --fix ]]; then
  clang-format-14 -i "${files[@]}"
else
  clang-format-14 --dry-run -Werror "${files[@]}"
  echo "check-format: ${#files[@]} files formatted"
fi
