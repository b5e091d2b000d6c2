#!/usr/bin/env bash
# Prints the interpreter `make setup` chose, or says to run it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; exit 0; fi
if [ -s .grace-python ] && [ -x "$(cat .grace-python)" ]; then cat .grace-python; exit 0; fi
echo "GraCE is not set up here: run 'make setup' first" >&2
exit 2
