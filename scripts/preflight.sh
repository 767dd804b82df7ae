#!/usr/bin/env bash
# What `make up` (and `make down`, with --docker-only) checks before it installs or creates anything:
# a Linux host, the tools README lists, a reachable Docker daemon, and room for the lab's images.
# Every problem is one line saying what to do; all of them are listed, then it exits 1.
# env: GPULAB_MIN_DOCKER_GB (free space wanted where Docker keeps images, default 15),
#      GPULAB_MIN_PROJECT_GB (free space wanted for ./venv, ./bin and Pulumi's plugins, default 3),
#      DOCKER_TIMEOUT (seconds for `docker info`, default 10)
set -euo pipefail

docker_only=false
[ "${1:-}" = "--docker-only" ] && docker_only=true
root=$(cd "$(dirname "$0")/.." && pwd)
problems=()
problem() { problems+=("$1"); }

# free_gb PATH: whole GB free on the filesystem holding PATH (empty when df cannot tell).
free_gb() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }'; }

if [ "$(uname -s)" != "Linux" ]; then
  problem "gpulab needs a Linux Docker host (this is $(uname -s)): MetalLB addresses on the kind network are not reachable from Docker Desktop"
fi

if ! $docker_only; then
  if ! command -v python3 >/dev/null; then
    problem "python3 is missing: install Python 3.11 or newer with venv (e.g. sudo apt-get install python3 python3-venv)"
  elif ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    problem "python3 is $(python3 -c 'import platform; print(platform.python_version())'); gpulab needs 3.11 or newer (or run make PYTHON_HOST=python3.12 up)"
  elif ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    problem "python3 has no venv/ensurepip module: install it (e.g. sudo apt-get install python3-venv)"
  fi
  for tool in make curl tar sha256sum; do
    command -v "$tool" >/dev/null || problem "$tool is missing: install it with your package manager (needed to fetch the pinned CLIs)"
  done
  wanted=${GPULAB_MIN_PROJECT_GB:-3}
  free=$(free_gb "$root")
  if [ -n "$free" ] && [ "$free" -lt "$wanted" ]; then
    problem "only ${free} GB free in $root; ./venv, ./bin and Pulumi's plugins need about ${wanted} GB"
  fi
fi

if ! command -v docker >/dev/null; then
  problem "docker is not installed: install Docker Engine (https://docs.docker.com/engine/install/) and start it"
elif ! root_dir=$(timeout "${DOCKER_TIMEOUT:-10}" docker info --format '{{.DockerRootDir}}' 2>/dev/null) || [ -z "$root_dir" ]; then
  problem "the Docker daemon is not reachable (docker info failed): start it (sudo systemctl start docker) and make sure $(id -un) may use it (sudo usermod -aG docker $(id -un), then log in again)"
elif ! $docker_only; then
  wanted=${GPULAB_MIN_DOCKER_GB:-15}
  free=$(free_gb "$root_dir")
  [ -n "$free" ] || free=$(free_gb /)
  if [ -n "$free" ] && [ "$free" -lt "$wanted" ]; then
    problem "only ${free} GB free where Docker keeps images ($root_dir); the reference lab needs about ${wanted} GB (docker system prune frees unused images)"
  fi
fi

if [ "${#problems[@]}" -gt 0 ]; then
  for line in "${problems[@]}"; do
    printf '[gpulab] preflight: %s\n' "$line" >&2
  done
  exit 1
fi
printf '[gpulab] preflight: ok\n' >&2
