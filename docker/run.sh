#!/usr/bin/env bash
# Run GraCE inside its Docker image, building the image first if it is missing.
#
#   docker/run.sh                        interactive bash in /workspace/grace
#   docker/run.sh bash scripts/smoke_test.sh
#   GRACE_REBUILD=1 docker/run.sh ...    rebuild the image even if it exists
#
# results/, figures/ and tables/ of this checkout are bind-mounted into the container, so
# whatever the container writes there lands on the host.
set -euo pipefail

IMAGE="${GRACE_IMAGE:-grace:torch2.11}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "${SCRIPT_DIR}/.." && pwd)"

if ! command -v docker >/dev/null 2>&1; then
    echo "docker/run.sh: 'docker' not found on PATH; install Docker and the NVIDIA container toolkit, or use 'make setup' on bare metal." >&2
    exit 127
fi

if [[ "${GRACE_REBUILD:-0}" == "1" ]] || ! docker image inspect "${IMAGE}" >/dev/null 2>&1; then
    echo "docker/run.sh: building ${IMAGE} from ${REPO_ROOT}" >&2
    (cd "${REPO_ROOT}" && docker build -t "${IMAGE}" -f docker/Dockerfile .)
fi

mkdir -p "${REPO_ROOT}/results" "${REPO_ROOT}/figures" "${REPO_ROOT}/tables"

if [[ $# -eq 0 ]]; then
    set -- bash
fi

# -t only when stdin is a terminal, so the script also works from CI or a pipe.
tty_flags=(-i)
if [[ -t 0 && -t 1 ]]; then
    tty_flags=(-it)
fi

exec docker run --rm "${tty_flags[@]}" --gpus all --ipc=host \
    -v "${REPO_ROOT}/results:/workspace/grace/results" \
    -v "${REPO_ROOT}/figures:/workspace/grace/figures" \
    -v "${REPO_ROOT}/tables:/workspace/grace/tables" \
    "${IMAGE}" "$@"
