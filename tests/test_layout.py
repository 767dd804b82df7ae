"""The layout shows the architecture (issue 23): the model at the ground floor, the ComponentResources
and the policy pack beside each other on it, the tools on top. Checked on the imports themselves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from shared_data import ROOT

PACKAGES = ("hami", "model", "components", "policies", "scripts", "preview", "report", "diagnose", "benchmarks")
# Which of gpulab's packages each may import. components and policies never import each other.
ALLOWED = {
    "hami": set(),  # HAMi's semantics: nothing of gpulab's (issue 31)
    "model": set(),
    "components": {"model"},
    "policies": {"model", "hami"},
    "scripts": {"model"},
    "report": {"model"},
    "preview": {"model", "policies", "hami"},  # runs the program (__main__.py) by path, not by import
    "diagnose": {"model", "components"},  # the names the components give what they create
    "benchmarks": {"model", "policies", "hami"},
}
SDKS = ("pulumi", "pulumi_kubernetes", "pulumi_docker", "pulumi_command", "kubernetes", "docker")
MAX_LINES = 500


def sources(package: str) -> list[Path]:
    return sorted(path for path in (ROOT / package).rglob("*.py") if "venv" not in path.parts)


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_only_the_floors_below_it(package: str) -> None:
    wrong = {
        f"{path.relative_to(ROOT)} imports {other}"
        for path in sources(package)
        for other in imports(path) & set(PACKAGES) - {package}
        if other not in ALLOWED[package]
    }
    assert not wrong, sorted(wrong)


def test_the_model_imports_no_pulumi_or_kubernetes_sdk_when_imported() -> None:
    """The policy pack's venv has none of them; where the model needs one (load_config, api_client) it
    imports it inside the function that runs only in the program or a live tool."""
    wrong = {f"{path.relative_to(ROOT)}: {sdk}" for path in sources("model") for sdk in imports(path, True) & set(SDKS)}
    assert not wrong, sorted(wrong)


def test_no_source_file_outside_tests_is_longer_than_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for package in PACKAGES
        for path in sources(package)
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_the_design_cards_top_level_is_there() -> None:
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py", "components", "policies", "tests"):
        assert (ROOT / name).exists(), name


@pytest.mark.parametrize("stack", ["Pulumi.dev.yaml", "tests/fixtures/lab/Pulumi.dev.yaml"])
def test_the_paths_a_stack_file_points_to_exist(stack: str) -> None:
    """The reference stack is where a user starts reading: every project path its comments name is there."""
    comments = " ".join(line.partition("#")[2] for line in (ROOT / stack).read_text().splitlines())
    paths = [path.rstrip(".") for path in re.findall(r"\b(?:model|components|policies|scripts)/[\w/.]*", comments)]
    assert paths, comments
    assert [path for path in paths if not (ROOT / path).exists()] == []


def test_hami_s_semantics_stand_alone_and_name_their_release() -> None:
    """Issue 31: hami/ imports only the standard library (no SDK, nothing of gpulab's), and names the HAMi
    release whose chart the lab deploys."""
    import sys

    from hami import HAMI_VERSION
    from model.versions import Versions

    outside = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("hami")
        if "tests" not in path.parts
        for name in imports(path)
        if name not in sys.stdlib_module_names and name not in ("__future__", "hami")
    }
    assert not outside, sorted(outside)
    assert f"v{Versions().hami.version}" == HAMI_VERSION
