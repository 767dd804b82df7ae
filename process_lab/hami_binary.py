"""Which `hami-scheduler` binary runs a tenant's HAMi release in process mode, and which release a binary is.

The Go module proxy refuses HAMi, so its scheduler is built by the user from a tag (docs/process-lab.md) and given
to gpulab; with two releases selectable per tenant (hamiVersion), gpulab must not run one release's binary for a
tenant that names the other. A binary says which release it is in its Go build information, which the Go linker
writes into every binary as text (`go version -m` prints it; runtime/debug.BuildInfo):
- the `-X github.com/Project-HAMi/HAMi/pkg/version.version=<tag>` of the build's `-ldflags` setting, which is how
  HAMi's own Makefile and docs/process-lab.md stamp a release (HAMi pkg/version/version.go `version`);
- `vcs.revision=<commit>`, which `go build` records when it builds in a git checkout (Go's -buildvcs default).
Reading that text is a read of the file, not a start of the program.

Where a release's binary is looked for, first found first:
1. GPULAB_HAMI_SCHEDULER_V2_10_0 (the release, dots as underscores) and ./bin/hami-scheduler-v2.10.0;
2. GPULAB_HAMI_SCHEDULER and ./bin/hami-scheduler, the names for one release that gpulab always took.
A binary found there that says it is another release is not taken; one that says nothing is taken only under a
name of the release (1.), since nothing else tells which it is.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass
from pathlib import Path

from model.hami_releases import RELEASES

GENERIC_VARIABLE = "GPULAB_HAMI_SCHEDULER"
GENERIC_NAME = "hami-scheduler"
_LDFLAGS_VERSION = re.compile(rb"HAMi/pkg/version\.version=(v[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}[0-9A-Za-z.+-]{0,40})")
_VCS_REVISION = re.compile(rb"vcs\.revision=([0-9a-f]{40})")


def variable_for(version: str) -> str:
    """`v2.10.0` -> GPULAB_HAMI_SCHEDULER_V2_10_0."""
    return f"{GENERIC_VARIABLE}_{version.upper().replace('.', '_')}"


def name_for(version: str) -> str:
    return f"{GENERIC_NAME}-{version}"


def binary_release(path: Path) -> str | None:
    """The HAMi release a binary says it is (its ldflags version, else the release of its VCS revision); None when
    its build information names neither."""
    try:
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            stamped = _LDFLAGS_VERSION.search(data)
            if stamped:
                return stamped.group(1).decode()
            revision = _VCS_REVISION.search(data)
            commit = revision.group(1).decode() if revision else None
    except (OSError, ValueError):  # unreadable, or empty (mmap of 0 bytes)
        return None
    if commit:
        return next((r.version for r in RELEASES.values() if r.commit == commit), f"commit {commit[:12]}")
    return None


@dataclass(frozen=True)
class Found:
    """The binary of one release, or why there is none (`problem`, one line naming the fix)."""

    version: str
    path: Path | None
    problem: str | None = None


def find(bin_dir: Path, version: str, environ: dict[str, str] | None = None) -> Found:
    """The `hami-scheduler` of HAMi `version` (the module's docstring says where it looks)."""
    env = os.environ if environ is None else environ
    candidates: list[tuple[Path, bool, str]] = []  # (path, named for the release, where it came from)
    if given := env.get(variable_for(version)):
        candidates.append((Path(given), True, variable_for(version)))
    candidates.append((bin_dir / name_for(version), True, str(bin_dir / name_for(version))))
    if given := env.get(GENERIC_VARIABLE):
        candidates.append((Path(given), False, GENERIC_VARIABLE))
    else:
        candidates.append((bin_dir / GENERIC_NAME, False, str(bin_dir / GENERIC_NAME)))
    refused: list[str] = []
    for path, named, origin in candidates:
        if not os.access(path, os.X_OK):
            if named and origin.startswith(GENERIC_VARIABLE):
                refused.append(f"{origin}={path} is not an executable file")
            continue
        says = binary_release(path)
        if says == version or (says is None and named):
            return Found(version, path)
        if says is None:
            refused.append(f"{origin} ({path}) does not say which HAMi release it is")
        else:
            refused.append(f"{origin} ({path}) is HAMi {says}")
    why = "; ".join(refused) if refused else "none found"
    return Found(
        version,
        None,
        f"no hami-scheduler of HAMi {version} ({why}): build HAMi {version}'s cmd/scheduler from its tag with "
        f"-ldflags '-X github.com/Project-HAMi/HAMi/pkg/version.version={version}' (docs/process-lab.md) and set "
        f"{variable_for(version)} to it (or put it at {bin_dir / name_for(version)}), or set the tenant's "
        "hamiVersion to a release you have",
    )
