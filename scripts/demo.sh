#!/usr/bin/env bash
# The main job on a built-in default (the README's first command): ResNet-18 compiled to a
# quantised VTA + CPU program and run on the timed simulator.  Extra arguments go to
# `vta run`, e.g. `bash scripts/demo.sh --image 64 --trace r18.json`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export AMARANTH_USE_YOSYS=builtin
exec .venv/bin/vta run builtin:resnet18 "$@"
