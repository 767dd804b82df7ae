"""Does a stack in gpulab's local state hold any resources? `make down` asks before it installs anything.

Standard library only (it runs before ./venv exists). Reads the file backend's checkpoint
(`<backend>/.pulumi/stacks/<project>/<stack>.json`, or `.json.gz`), which lists resources in the
clear (only secret values are encrypted). Exit 0: the stack has resources, or the backend is not a
local one and only the Pulumi CLI can tell; 3: nothing to destroy (no such stack, or empty); 2: usage.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

NOTHING = 3


def checkpoint_paths(backend: Path, project: str, stack: str) -> list[Path]:
    stacks = backend / ".pulumi" / "stacks"
    return [folder / f"{stack}{suffix}" for folder in (stacks / project, stacks) for suffix in (".json", ".json.gz")]


def resource_count(path: Path) -> int:
    raw = path.read_bytes()
    document = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    latest = (document.get("checkpoint") or {}).get("latest") or {}
    return len(latest.get("resources") or [])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 scripts/stack_state.py STACK", file=sys.stderr)
        return 2
    stack = argv[0]
    url = os.environ.get("PULUMI_BACKEND_URL", "")
    if not url.startswith("file://"):
        return 0  # a service or bucket backend: let `pulumi destroy` decide
    backend = Path(unquote(urlparse(url).path))
    found = [path for path in checkpoint_paths(backend, "gpulab", stack) if path.is_file()]
    if not found:
        print(f"[gpulab] nothing to destroy: no stack {stack!r} in {backend}", file=sys.stderr)
        return NOTHING
    count = resource_count(found[0])
    if count == 0:
        print(f"[gpulab] nothing to destroy: stack {stack!r} has no resources", file=sys.stderr)
        return NOTHING
    print(f"[gpulab] stack {stack!r} has {count} resources to destroy", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
