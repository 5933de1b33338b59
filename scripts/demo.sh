#!/usr/bin/env bash
# The main job on a built-in default (the README's first command).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export AMARANTH_USE_YOSYS=builtin
exec .venv/bin/vta demo "$@"
