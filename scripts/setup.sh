#!/usr/bin/env bash
# Creates .venv and installs the project with everything the tests need; installs Icarus
# Verilog with apt when it is missing.  Safe to run again: it skips what is already done.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.vta-stack-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install -qq --upgrade pip
    .venv/bin/python -m pip install -qq -e ".[all]"
    echo "$want" > "$stamp"
fi
if ! command -v iverilog >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq iverilog >/dev/null
fi
