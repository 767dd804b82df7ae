"""Does a stack in gpulab's local state hold any resources? `make down` asks before it installs anything.

Standard library only: it runs before ./venv exists, as `python3 -m hack.stack_state` from the project folder.
Reads the file backend's checkpoint (`<backend>/.pulumi/stacks/<project>/<stack>.json`, or `.json.gz`), which
lists resources in the clear (only secret values are encrypted). Exit 0: the stack has resources, or the backend
is not a local one and only the Pulumi CLI can tell; 3: nothing to destroy (no such stack, or empty); 2: usage.
"""

from __future__ import annotations

import sys

from boundary.pulumi_state import checkpoint_file, local_backend, resources

NOTHING = 3


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m hack.stack_state STACK", file=sys.stderr)
        return 2
    stack = argv[0]
    backend = local_backend()
    if backend is None:
        return 0  # a service or bucket backend: let `pulumi destroy` decide
    found = checkpoint_file(backend, "gpulab", stack)
    if found is None:
        print(f"[gpulab] nothing to destroy: no stack {stack!r} in {backend}", file=sys.stderr)
        return NOTHING
    count = len(resources(found))
    if count == 0:
        print(f"[gpulab] nothing to destroy: stack {stack!r} has no resources", file=sys.stderr)
        return NOTHING
    print(f"[gpulab] stack {stack!r} has {count} resources to destroy", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
