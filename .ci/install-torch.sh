#!/usr/bin/env bash
# Install PyTorch for the real training job of `make test-real` (tests/real/train.py): Debian's python3-torch, a CPU
# build for the system Python (/usr/bin/python3). Not PyPI's torch, whose default wheel pulls several GB of CUDA
# libraries. Idempotent and quick when it is already there. Debian/Ubuntu.
set -euo pipefail

PYTHON=/usr/bin/python3
have_torch() {
    "$PYTHON" -c "import torch, torch.distributed as dist; assert dist.is_gloo_available()" >/dev/null 2>&1
}

if have_torch; then
    echo "install-torch: already installed ($("$PYTHON" -c 'import torch; print(torch.__version__)'))"
    exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-torch: needs root or sudo" >&2; exit 1; }
    SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends python3-torch; then
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends python3-torch
fi

have_torch || { echo "install-torch: python3-torch installed but $PYTHON cannot import torch with gloo" >&2; exit 1; }
echo "install-torch: installed $("$PYTHON" -c 'import torch; print(torch.__version__)')"
