"""Which runtime a stack runs on: `docker` (the default) or `process` (`gpulab:runtime: process`).

Standard library only: make asks before ./venv exists, to choose between the Docker lab's steps (preflight,
downloads) and process mode's (the programs `make tools` built; no Docker, no download). Only the one
top-level key is read; gpulab's own loader validates the whole file right after.
Usage: python3 hack/stack_runtime.py STACK (prints docker or process; no such file: docker).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

RUNTIME = re.compile(r"""^\s+["']?gpulab:runtime["']?\s*:\s*["']?([A-Za-z]+)["']?\s*(#.*)?$""")


def runtime(stack_file: Path) -> str:
    if not stack_file.is_file():
        return "docker"
    for line in stack_file.read_text(errors="replace").splitlines():
        match = RUNTIME.match(line)
        if match:
            return match.group(1)
    return "docker"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 hack/stack_runtime.py STACK")
    print(runtime(Path(__file__).resolve().parents[1] / f"Pulumi.{sys.argv[1]}.yaml"))
