"""What gpulab's local Pulumi state records: the file backend's checkpoint, read without the CLI.

The file backend keeps a stack's last checkpoint at `<backend>/.pulumi/stacks/<project>/<stack>.json` (or
`.json.gz`; older layouts without the project folder), with every resource's URN, inputs and outputs in the
clear except secret values (pulumi pkg/backend/diy/backend.go, stackPath). Standard library only: make's
scripts read it before ./venv exists, and the program reads it to tell what a run is about to lose.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse


def local_backend(url: str | None = None) -> Path | None:
    """The folder of a file:// backend (PULUMI_BACKEND_URL by default); None for a service or bucket."""
    url = os.environ.get("PULUMI_BACKEND_URL", "") if url is None else url
    return Path(unquote(urlparse(url).path)) if url.startswith("file://") else None


def checkpoint_paths(backend: Path, project: str, stack: str) -> list[Path]:
    stacks = backend / ".pulumi" / "stacks"
    return [folder / f"{stack}{suffix}" for folder in (stacks / project, stacks) for suffix in (".json", ".json.gz")]


def checkpoint_file(backend: Path, project: str, stack: str) -> Path | None:
    return next((path for path in checkpoint_paths(backend, project, stack) if path.is_file()), None)


def resources(path: Path) -> list[dict[str, Any]]:
    """The resources of a checkpoint file's latest deployment."""
    raw = path.read_bytes()
    document = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    latest = (document.get("checkpoint") or {}).get("latest") or {}
    return list(latest.get("resources") or [])


def recorded(project: str, stack: str, urn_suffix: str, backend: Path | None = None) -> list[dict[str, Any]]:
    """The resources of the stack's local state whose URN ends with `urn_suffix` (none without a local state,
    or with one that cannot be read: this only informs, it never decides)."""
    backend = backend or local_backend()
    path = checkpoint_file(backend, project, stack) if backend else None
    if path is None:
        return []
    try:
        return [resource for resource in resources(path) if str(resource.get("urn", "")).endswith(urn_suffix)]
    except (OSError, ValueError, EOFError):
        return []
