#!/usr/bin/env bash
# What `make up` (and `make down`, with --docker-only) checks before it installs or creates anything:
# a Linux host, the tools docs/setup.md lists, a reachable Docker daemon, and room for the lab's images.
# Every problem is one line saying what to do; all of them are listed, then it exits 1.
# A stack that runs nothing in local Docker (an existing management cluster, every worker over SSH)
# is not asked for a Docker daemon.
# env: PYTHON_HOST (the Python that creates ./venv, as in the Makefile; default python3),
#      STACK (which Pulumi.<stack>.yaml to read the modes from; default dev), VENV (default ./venv),
#      GPULAB_MIN_DOCKER_GB (free space wanted where Docker keeps images, default 15),
#      GPULAB_MIN_PROJECT_GB (free space wanted for ./venv, ./bin and Pulumi's plugins, default 3),
#      DOCKER_TIMEOUT (seconds for `docker info`, default 10)
set -euo pipefail

docker_only=false
[ "${1:-}" = "--docker-only" ] && docker_only=true
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON_HOST:-python3}
venv=${VENV:-$root/venv}
stack=${STACK:-dev}
problems=()
problem() { problems+=("$1"); }

# whole NAME DEFAULT: sets $number to $NAME (DEFAULT when unset or empty) when that is a whole number;
# otherwise records a problem naming it and returns 1, and the check that needed it is not run.
number=
whole() {
  local value=${!1:-$2}
  if [[ $value =~ ^[0-9]{1,9}$ ]]; then
    number=$((10#$value))
    return 0
  fi
  problem "$1='${value}' is not a whole number: set it to one (e.g. $1=$2) or unset it for the default $2"
  return 1
}

# Does the stack run anything in local Docker: yes, no, or unknown? Asked of gpulab's own config loader
# (model/config/) through ./venv's python when it exists, else through $python when it has
# pydantic and PyYAML. No stack file means the default, kind: yes. An invalid stack file is unknown
# (`make plan` names its mistakes), and so is one no Python here can read yet (a fresh clone).
stack_file="$root/Pulumi.$stack.yaml"
docker_use() {
  local reader=$python answer=
  [ -f "$stack_file" ] || { echo yes; return; }
  [ -x "$venv/bin/python" ] && reader="$venv/bin/python"
  answer=$(cd "$root" && timeout 60 "$reader" - "$stack_file" 2>/dev/null <<'PY'
import sys
from pathlib import Path

from model.config import load_stack_file

lab = load_stack_file(Path(sys.argv[1]))
local = lab.management.mode == "kind" or any(tenant.worker_mode == "container" for tenant in lab.tenants)
print("yes" if local else "no")
PY
  ) || true
  case $answer in yes | no) echo "$answer" ;; *) echo unknown ;; esac
}

# free_gb PATH: whole GB free on the filesystem holding PATH (empty when df cannot tell).
free_gb() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }'; }

if [ "$(uname -s)" != "Linux" ]; then
  problem "gpulab needs a Linux Docker host (this is $(uname -s)): MetalLB addresses on the kind network are not reachable from Docker Desktop"
fi

if ! $docker_only; then
  if ! command -v "$python" >/dev/null; then
    problem "$python is missing: install Python 3.11 or newer with venv (e.g. sudo apt-get install python3 python3-venv), or name another one: make PYTHON_HOST=python3.12 up"
  else
    # One start of it for both questions (make up runs this every time), answered in a word on stdout, so that
    # neither a program that is not Python nor an exit code of its own is taken for an answer.
    answer=$("$python" -c $'import sys\nif sys.version_info < (3, 11): print("old"); sys.exit()\ntry: import venv, ensurepip\nexcept Exception: print("no-venv"); sys.exit()\nprint("ok")' \
      2>/dev/null) || answer=
    case $answer in
    ok) ;;
    no-venv) problem "$python has no venv/ensurepip module: install it (e.g. sudo apt-get install python3-venv)" ;;
    *) problem "$python is $("$python" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo 'not a working Python'); gpulab needs 3.11 or newer (e.g. make PYTHON_HOST=python3.12 up)" ;;
    esac
  fi
  for tool in make curl tar sha256sum flock; do
    command -v "$tool" >/dev/null || problem "$tool is missing: install it with your package manager (needed to fetch the pinned CLIs)"
  done
  wanted=
  whole GPULAB_MIN_PROJECT_GB 3 && wanted=$number
  free=$(free_gb "$root")
  if [ -n "$wanted" ] && [ -n "$free" ] && [ "$free" -lt "$wanted" ]; then
    problem "only ${free} GB free in $root; ./venv, ./bin and Pulumi's plugins need about ${wanted} GB"
  fi
fi

docker_timeout=
wanted_docker=
whole DOCKER_TIMEOUT 10 && docker_timeout=$number
whole GPULAB_MIN_DOCKER_GB 15 && wanted_docker=$number
if [ "$(id -u)" = 0 ]; then
  may_use="start it (sudo systemctl start docker)"
else
  may_use="start it (sudo systemctl start docker) and make sure $(id -un) may use it (sudo usermod -aG docker $(id -un), then log in again)"
fi
uses_docker=$(docker_use)
hint=
if [ "$uses_docker" = unknown ] && grep -Eq '^[[:space:]]*mode:[[:space:]]*["'"'"']?existing' "$stack_file"; then
  hint="; if stack $stack has an existing cluster and SSH workers only, it needs no Docker: run \`make plan STACK=$stack\` once (it creates ./venv, with which preflight can read the stack) and retry"
fi
if [ "$uses_docker" = no ]; then
  : # an existing management cluster and SSH workers: nothing runs in local Docker
elif ! command -v docker >/dev/null; then
  problem "docker is not installed: install Docker Engine (https://docs.docker.com/engine/install/) and start it$hint"
elif [ -z "$docker_timeout" ]; then
  : # DOCKER_TIMEOUT is already a problem; asking the daemon without a bound could hang
elif ! root_dir=$(timeout "$docker_timeout" docker info --format '{{.DockerRootDir}}' 2>/dev/null) || [ -z "$root_dir" ]; then
  problem "the Docker daemon is not reachable (docker info failed): $may_use$hint"
elif ! $docker_only && [ -n "$wanted_docker" ]; then
  free=$(free_gb "$root_dir")
  [ -n "$free" ] || free=$(free_gb /)
  if [ -n "$free" ] && [ "$free" -lt "$wanted_docker" ]; then
    problem "only ${free} GB free where Docker keeps images ($root_dir); the reference lab needs about ${wanted_docker} GB (docker system prune frees unused images)"
  fi
fi

if [ "${#problems[@]}" -gt 0 ]; then
  for line in "${problems[@]}"; do
    printf '[gpulab] preflight: %s\n' "$line" >&2
  done
  exit 1
fi
printf '[gpulab] preflight: ok\n' >&2
