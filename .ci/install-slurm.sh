#!/usr/bin/env bash
# Install the Slurm and munge packages the agent tests run against (Debian/Ubuntu).
# Idempotent and quick when they are already there. It does not start anything: the tests
# start their own munged, slurmctld and slurmd (tests/agent/local_slurm.py).
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge)
BINARIES=(munged slurmctld slurmd scontrol squeue sbatch sinfo scancel)

have_all() {
    local binary
    for binary in "${BINARIES[@]}"; do
        PATH="$PATH:/usr/sbin:/sbin" command -v "$binary" >/dev/null 2>&1 || return 1
    done
}

if have_all; then
    echo "install-slurm: already installed ($(slurmctld -V 2>/dev/null || echo slurm))"
    exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-slurm: needs root or sudo" >&2; exit 1; }
    SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
# Package scripts must not start daemons here (there may be no init system, and the tests own them).
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=0
if [[ ! -e "$POLICY" ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null
    "${SUDO[@]}" chmod 755 "$POLICY"
    ADDED_POLICY=1
fi
cleanup() {
    if [[ "$ADDED_POLICY" -eq 1 ]]; then
        "${SUDO[@]}" rm -f "$POLICY"
    fi
}
trap cleanup EXIT

if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"; then
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
fi

have_all || { echo "install-slurm: packages installed but binaries missing" >&2; exit 1; }
echo "install-slurm: installed $(slurmctld -V)"
