#!/usr/bin/env bash
# The test suite (the README's second command; .ci/run calls exactly this).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh --run-slow` for the opt-in tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export AMARANTH_USE_YOSYS=builtin
exec .venv/bin/python -m pytest -n 2 "$@"
