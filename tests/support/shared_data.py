"""Where tests find the project, and readers for the upstream files (located by upstream_data)."""

from __future__ import annotations

import functools
import json
import tarfile
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from upstream_data import upstream_path

ROOT = Path(__file__).resolve().parents[2]


# libyaml's safe loader when PyYAML has it: the Kamaji CRD is 700 kB, 10x slower in pure Python.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def upstream_yaml(relative: str):
    return yaml.load(upstream_path(relative).read_text(), Loader=SAFE_LOADER)


KAMAJI_CHART = "charts/kamaji-0.0.0+latest-26.8.2-edge.tgz"
HAMI_CHART = "charts/hami-2.8.3.tgz"


@functools.cache
def chart_values(archive: str) -> dict:
    """A chart archive's values.yaml, with each bundled subchart's values.yaml under the subchart's name
    (the keys a parent chart may set for it)."""
    values: dict = {}
    subcharts: dict[str, dict] = {}
    with tarfile.open(upstream_path(archive)) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if parts[-1] != "values.yaml" or not member.isfile():
                continue
            document = yaml.load(tar.extractfile(member).read(), Loader=SAFE_LOADER) or {}
            if len(parts) == 2:
                values = document
            elif len(parts) == 4 and parts[1] == "charts":
                subcharts[parts[2]] = document
    for name, subchart in subcharts.items():
        values[name] = {**subchart, **(values.get(name) or {})}
    return values


@functools.cache
def crd_schema(relative: str, version: str) -> dict:
    crd = upstream_yaml(relative)
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return entry["schema"]["openAPIV3Schema"]
    raise AssertionError(f"{relative} has no version {version}")


@functools.cache
def _crd_validator(relative: str, version: str):
    """The schema is checked against its metaschema once per process: for Kamaji's 700 kB CRD that check
    costs 0.8 CPU-s, which jsonschema.validate() pays again on every call."""
    schema = crd_schema(relative, version)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_crd(instance: dict, relative: str, version: str) -> None:
    """jsonschema.validate(instance, crd_schema(relative, version)): the same error (best_match) raised."""
    error = jsonschema.exceptions.best_match(_crd_validator(relative, version).iter_errors(instance))
    if error is not None:
        raise error


def undeclared_paths(instance: Any, schema: dict, path: str = "") -> list[str]:
    """The keys of `instance` that a structural schema does not declare. JSON Schema lets them pass, but the API
    server prunes them from a custom resource without a word (apiextensions-apiserver pkg/apiserver/schema/pruning),
    so a misspelt field would be lost silently: a test of what gpulab sends asks for none."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(instance, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in instance.items():
            if properties is not None and key in properties:
                found += undeclared_paths(value, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += undeclared_paths(value, extra, f"{path}.{key}")
            elif properties is not None or extra is False:
                found.append(f"{path}.{key}")
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(instance):
            found += undeclared_paths(item, schema["items"], f"{path}[{index}]")
    return found


def json_key(value: Any) -> str | None:
    """`value` as canonical JSON, for memos keyed by what a test asks; None when JSON would blur it (int keys,
    tuples, dates, NaN): such a request is not remembered."""
    try:
        key = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return None
    return key if json.loads(key) == value else None


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
    """Whether a chart's values.yaml has a value at path. An empty map there (`podAnnotations: {}`) is one the chart
    leaves to its user: any key below it is a value the chart reads as it stands."""
    node = values
    for key in path:
        if node == {}:
            return True
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
