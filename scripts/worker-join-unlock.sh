#!/usr/bin/env bash
# On destroy: removes the host-side lock file of a container worker's joins (worker-join.sh), which otherwise
# outlives the lab in the temp folder. Destroy holds the stack's lock, so no join of it runs now.
# env: CONTAINER
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${CONTAINER:?}"
rm -f "$(container_join_lock "$CONTAINER")"
