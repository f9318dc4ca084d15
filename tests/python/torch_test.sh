#!/usr/bin/env bash
# torch_check.py on 2 ranks; skipped (77) without Debian's python3-torch.
# Usage: torch_test.sh RLXRUN PYTHON_MODULE_DIR
set -euo pipefail
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "python_torch: skipped, Debian's python3-torch is not installed"
  exit 77
fi
here=$(dirname "$(realpath "$0")")
exec "$here/../support/expect_lines.sh" 2 "rank [01] of 2: torch ok$" -- \
  env PYTHONPATH="$2" "$1" -n 2 --timeout 120 /usr/bin/python3 "$here/torch_check.py"
