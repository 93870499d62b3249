#!/usr/bin/env bash
# Install the Medic agent on a SageMaker HyperPod Slurm cluster, from its lifecycle scripts (run as root).
#
# Run it on every node (e.g. from on_create.sh); it only installs on controller (head) nodes: the
# nodes whose address is listed under a controller instance group in HyperPod's
# /opt/ml/config/resource_config.json (several head nodes: every one of them; head nodes in several
# instance groups: repeat --controller-group). Everywhere else it says so and exits 0.
#
#   bash install.sh --controller-group controller-machine --cluster my-cluster \
#        --queue-url https://sqs.us-east-1.amazonaws.com/123456789012/medic-agent-my-cluster \
#        --table medic-ledger --region us-east-1
#
# It creates a virtualenv in /opt/medic-agent, pip-installs the pinned dependencies (requirements.txt
# beside this script: exact versions, --require-hashes), then the agent package (this directory, or
# --source) without dependencies, writes /etc/medic-agent.env, installs and starts medic-agent.service.
# Offline nodes: --wheelhouse DIR with the agent's wheel and its dependencies (pip download).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONTROLLER_GROUPS=()
AGENT_HOST=""
CLUSTER=""
QUEUE_URL=""
TABLE=""
REGION=""
NODE_ADDRESS=""
SOURCE="$SCRIPT_DIR"
REQUIREMENTS="$SCRIPT_DIR/requirements.txt"
WHEELHOUSE=""
RESOURCE_CONFIG="/opt/ml/config/resource_config.json"
PREFIX="/opt/medic-agent"
ENV_FILE="/etc/medic-agent.env"
UNIT_DIR="/etc/systemd/system"
PYTHON="python3"
START=1

log() { printf '[medic-agent install] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }

usage() {
    sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    cat <<'EOF'
Options:
  --controller-group NAME   instance group of the Slurm controller(s) (required; repeat for several groups)
  --cluster NAME            HyperPod cluster name (required)
  --queue-url URL           the cluster's Medic command queue (required)
  --table NAME              Medic's ledger table (required)
  --region REGION           AWS region (required)
  --node-address ADDR       this node's address as listed in the resource config (default: detected)
  --host NAME               this head node's name as SlurmctldHost lists it (default: its hostname)
  --source PATH             agent package directory or wheel (default: this script's directory)
  --requirements PATH       pinned, hashed dependencies (default: requirements.txt beside this script)
  --wheelhouse DIR          install offline from DIR (pip --no-index --find-links DIR)
  --resource-config PATH    default /opt/ml/config/resource_config.json
  --prefix DIR              virtualenv location (default /opt/medic-agent)
  --env-file PATH           default /etc/medic-agent.env
  --unit-dir DIR            default /etc/systemd/system
  --python PATH             python to create the virtualenv with (default python3)
  --no-start                install and enable, do not (re)start
EOF
}

need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --controller-group) need_value "$@"; CONTROLLER_GROUPS+=("$2"); shift 2 ;;
        --host) need_value "$@"; AGENT_HOST="$2"; shift 2 ;;
        --cluster) need_value "$@"; CLUSTER="$2"; shift 2 ;;
        --queue-url) need_value "$@"; QUEUE_URL="$2"; shift 2 ;;
        --table) need_value "$@"; TABLE="$2"; shift 2 ;;
        --region) need_value "$@"; REGION="$2"; shift 2 ;;
        --node-address) need_value "$@"; NODE_ADDRESS="$2"; shift 2 ;;
        --source) need_value "$@"; SOURCE="$2"; shift 2 ;;
        --requirements) need_value "$@"; REQUIREMENTS="$2"; shift 2 ;;
        --wheelhouse) need_value "$@"; WHEELHOUSE="$2"; shift 2 ;;
        --resource-config) need_value "$@"; RESOURCE_CONFIG="$2"; shift 2 ;;
        --prefix) need_value "$@"; PREFIX="$2"; shift 2 ;;
        --env-file) need_value "$@"; ENV_FILE="$2"; shift 2 ;;
        --unit-dir) need_value "$@"; UNIT_DIR="$2"; shift 2 ;;
        --python) need_value "$@"; PYTHON="$2"; shift 2 ;;
        --no-start) START=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done

# --- validate: every value ends up in a file systemd parses, so each must be plain.
matches() { [[ "$1" =~ $2 ]]; }  # $2 unquoted on purpose: it is the regex
[[ ${#CONTROLLER_GROUPS[@]} -gt 0 ]] || die "--controller-group is required"
for group in "${CONTROLLER_GROUPS[@]}"; do
    matches "$group" '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' || die "--controller-group is not an instance group name"
done
[[ -z "$AGENT_HOST" ]] || matches "$AGENT_HOST" '^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$' || die "--host must be a hostname"
matches "$CLUSTER" '^[A-Za-z0-9][A-Za-z0-9-]{0,62}$' || die "--cluster must be a HyperPod cluster name"
matches "$QUEUE_URL" '^https://[A-Za-z0-9.-]+(:[0-9]+)?/[0-9]{12}/[A-Za-z0-9_-]{1,80}$' \
    || die "--queue-url must be an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)"
matches "$TABLE" '^[A-Za-z0-9_.-]{3,255}$' || die "--table must be a DynamoDB table name"
matches "$REGION" '^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$' || die "--region must be an AWS region"
[[ -r "$REQUIREMENTS" ]] || die "cannot read --requirements $REQUIREMENTS"
for path_option in "--prefix=$PREFIX" "--env-file=$ENV_FILE" "--unit-dir=$UNIT_DIR"; do
    matches "${path_option#*=}" '^/[A-Za-z0-9._/-]+$' || die "${path_option%%=*} must be an absolute path of plain characters"
done

# --- only on the controller
this_group() {
    local addresses=()
    if [[ -n "$NODE_ADDRESS" ]]; then
        addresses=("$NODE_ADDRESS")
    else
        read -r -a addresses <<< "$(hostname -I 2>/dev/null || true)"
    fi
    "$PYTHON" - "$RESOURCE_CONFIG" "$NODE_ADDRESS" "${addresses[@]}" <<'PY'
import json
import socket
import sys

path, given, addresses = sys.argv[1], sys.argv[2], set(sys.argv[3:])
if not given:
    try:  # the address the node routes from, as HyperPod's own lifecycle scripts find it
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect(("10.254.254.254", 1))
        addresses.add(probe.getsockname()[0])
        probe.close()
    except OSError:
        pass
with open(path, encoding="utf-8") as handle:
    config = json.load(handle)
for group in config.get("InstanceGroups", []):
    for instance in group.get("Instances") or []:
        if instance.get("CustomerIpAddress") in addresses:
            print(group.get("Name") or group.get("InstanceGroupName") or "")
            sys.exit(0)
sys.exit(3)
PY
}

[[ -r "$RESOURCE_CONFIG" ]] || die "cannot read $RESOURCE_CONFIG (is this a HyperPod node?)"
GROUP="$(this_group)" || die "this node's address is not in $RESOURCE_CONFIG"
IS_CONTROLLER=0
for group in "${CONTROLLER_GROUPS[@]}"; do
    [[ "$GROUP" == "$group" ]] && IS_CONTROLLER=1
done
if [[ $IS_CONTROLLER -eq 0 ]]; then
    log "this node is in instance group '$GROUP', not the controller group '${CONTROLLER_GROUPS[*]}': nothing to do"
    exit 0
fi
log "controller node (instance group '$GROUP'): installing the Medic agent"

# --- virtualenv and package
if [[ ! -x "$PREFIX/bin/pip" ]]; then
    if ! "$PYTHON" -m venv "$PREFIX"; then
        if command -v apt-get >/dev/null 2>&1; then
            log "python venv support missing; installing python3-venv"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv
            "$PYTHON" -m venv "$PREFIX"
        else
            die "cannot create a virtualenv with $PYTHON"
        fi
    fi
fi
PIP_ARGS=(install --quiet --upgrade --disable-pip-version-check)
if [[ -n "$WHEELHOUSE" ]]; then
    PIP_ARGS+=(--no-index --find-links "$WHEELHOUSE")
fi
# Exactly the pinned versions, each checked against its hash (a changed or substituted file is refused),
# then the agent itself: --no-deps (its dependencies are the pinned ones) and --no-build-isolation (its
# build backend is the pinned setuptools, not whatever an isolated build environment would fetch).
"$PREFIX/bin/pip" "${PIP_ARGS[@]}" --require-hashes -r "$REQUIREMENTS"
"$PREFIX/bin/pip" "${PIP_ARGS[@]}" --no-deps --no-build-isolation "$SOURCE"

# --- configuration (written whole, then moved into place; readable by root only)
umask 077
ENV_TMP="$(mktemp "$ENV_FILE.XXXXXX")"
{
    printf '# Written by medic-agent install.sh\n'
    printf "MEDIC_CLUSTER='%s'\n" "$CLUSTER"
    printf "MEDIC_QUEUE_URL='%s'\n" "$QUEUE_URL"
    printf "MEDIC_TABLE='%s'\n" "$TABLE"
    printf "MEDIC_REGION='%s'\n" "$REGION"
    printf "AWS_REGION='%s'\n" "$REGION"
    [[ -z "$AGENT_HOST" ]] || printf "MEDIC_HOST='%s'\n" "$AGENT_HOST"
} > "$ENV_TMP"
mv -f "$ENV_TMP" "$ENV_FILE"

mkdir -p "$UNIT_DIR"
umask 022
sed "s#^ExecStart=.*#ExecStart=$PREFIX/bin/medic-agent#; s#^EnvironmentFile=.*#EnvironmentFile=$ENV_FILE#" \
    "$SCRIPT_DIR/systemd/medic-agent.service" > "$UNIT_DIR/medic-agent.service"

# --- service
systemctl daemon-reload
systemctl enable medic-agent.service
if [[ "$START" -eq 1 ]]; then
    systemctl restart medic-agent.service
    log "started: journalctl -u medic-agent -f"
else
    log "installed and enabled, not started (--no-start)"
fi
