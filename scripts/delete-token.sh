#!/usr/bin/env bash
# After a worker joined: deletes its bootstrap token from the tenant, so nobody else can join
# with it (it would otherwise stay valid until it expires, TTL_MINUTES after it was made).
# stdin: tenant admin kubeconfig. env: TOKEN_ID, TENANT
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${TOKEN_ID:?}"
kubeconfig_from_stdin
kc -n kube-system delete secret "bootstrap-token-$TOKEN_ID" --ignore-not-found >/dev/null ||
  die "could not delete bootstrap token $TOKEN_ID from tenant ${TENANT:-?} (see above); it stays valid until it" \
    "expires, TTL_MINUTES after it was made: delete it with kubectl -n kube-system delete secret bootstrap-token-$TOKEN_ID"
log "bootstrap token $TOKEN_ID deleted from tenant ${TENANT:-?}"
