"""Where tests find the project and the read-only upstream files in ../shared/upstream."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def upstream_path(relative: str) -> Path:
    """A file under ../shared/upstream; a missing one fails the test with what to do, never skips it."""
    path = SHARED / "upstream" / relative
    if not path.is_file():
        pytest.fail(
            f"upstream test data {path} is missing: these tests validate against the upstream schemas kept in "
            "../shared/upstream (see its SOURCES.md); check out the project next to shared/"
        )
    return path


@functools.cache
def upstream_yaml(relative: str):
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the Kamaji CRD is 700 kB
    return yaml.load(upstream_path(relative).read_text(), Loader=loader)


@functools.cache
def crd_schema(relative: str, version: str) -> dict:
    crd = upstream_yaml(relative)
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return entry["schema"]["openAPIV3Schema"]
    raise AssertionError(f"{relative} has no version {version}")


def leaf_paths(values: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths to the leaves of nested chart values, to look each up in a chart's values.yaml."""
    paths = []
    for key, value in values.items():
        if isinstance(value, dict) and value:
            paths.extend(leaf_paths(value, (*prefix, key)))
        else:
            paths.append((*prefix, key))
    return paths


def has_path(values: dict, path: tuple[str, ...]) -> bool:
    node = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
