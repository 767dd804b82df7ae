"""The layout shows the architecture (issue 23): the model at the ground floor, the ComponentResources
and the policy pack beside each other on it, the tools on top. Checked on the imports themselves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from shared_data import ROOT

PACKAGES = (
    "hami",
    "model",
    "components",
    "policies",
    "process_lab",
    "scripts",
    "preview",
    "report",
    "diagnose",
    "benchmarks",
)
# Every arrow that may exist between gpulab's packages: which each may import. components and policies never
# import each other; process_lab (local programs: no SDK) sits below the components that drive it.
ALLOWED = {
    "hami": set(),  # HAMi's semantics: nothing of gpulab's (issue 31)
    "model": set(),
    "policies": {"model", "hami"},
    "process_lab": {"model", "policies", "hami"},  # the differential asks the pack's engine what HAMi would do
    "components": {"model", "process_lab"},
    "scripts": {"model"},
    "report": {"model"},
    "preview": {"model", "policies", "hami", "process_lab"},  # runs the program (__main__.py) by path
    "diagnose": {"model", "components", "process_lab"},  # the components' names; process mode's processes
    "benchmarks": {"model", "policies", "hami", "process_lab"},
}
# The components of each runtime (issue 39): __main__.py picks one set; none imports another runtime's, and the
# shared ones (a tenant's own objects, the parts' protocols, the script runner) import neither.
RUNTIMES = {
    "docker": {
        "image_cache",
        "management_cluster",
        "tenant_control_plane",
        "tenant_worker",
        "hami_chart",
        "mock_gpu_node",
        "real_gpu_node",
        "sources",
    },
    "process": {
        "process_control_plane",
        "kwok_workers",
        "node_container_workers",
        "process_gpu_node",
        "process_resources",
    },
}
SHARED_COMPONENTS = {"__init__", "parts", "shell", "gpu_admission", "tenant_namespaces", "gpu_workloads"}
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


def test_the_allowed_arrows_make_no_circle() -> None:
    """Read as a graph, ALLOWED has no cycle: every package stands on floors strictly below it."""
    placed: list[str] = []
    while len(placed) < len(ALLOWED):
        ready = [name for name, below in ALLOWED.items() if name not in placed and below <= set(placed)]
        assert ready, f"a circle among {sorted(set(ALLOWED) - set(placed))}"
        placed += ready


def component_imports(path: Path) -> set[str]:
    """The components modules a component imports, by module name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("components."):
            found.add(node.module.split(".")[-1])
    return found


def test_each_component_belongs_to_one_runtime_or_to_all() -> None:
    """No component names another runtime: a Docker part imports no process part or process_lab, a process part
    no Docker part and no Docker or command provider; the shared ones import no runtime's parts."""
    modules = {path.stem: path for path in (ROOT / "components").rglob("*.py") if path.parent.name != "docker"}
    modules |= {path.stem: path for path in (ROOT / "components" / "docker").glob("*.py") if path.stem != "__init__"}
    assert set(modules) == SHARED_COMPONENTS | RUNTIMES["docker"] | RUNTIMES["process"], "a component not placed"
    wrong = []
    for runtime, own in RUNTIMES.items():
        others = set().union(*(mods for name, mods in RUNTIMES.items() if name != runtime))
        for module in own:
            wrong += [f"{module} imports {other}" for other in component_imports(modules[module]) & others]
    for module in RUNTIMES["docker"]:
        wrong += [f"{module} imports process_lab" for _ in imports(modules[module]) & {"process_lab"}]
    for module in RUNTIMES["process"]:
        wrong += [f"{module} imports {sdk}" for sdk in imports(modules[module]) & {"pulumi_docker", "pulumi_command"}]
    for module in SHARED_COMPONENTS:
        runtime_modules = RUNTIMES["docker"] | RUNTIMES["process"]
        wrong += [f"{module} imports {other}" for other in component_imports(modules[module]) & runtime_modules]
        wrong += [f"{module} imports process_lab" for _ in imports(modules[module]) & {"process_lab"}]
    assert not wrong, sorted(wrong)


def test_the_runtime_is_chosen_once_in_the_program() -> None:
    """Only __main__.py reads which runtime a stack has; no component branches on it."""
    readers = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "components").glob("*.py") if "process_mode" in path.read_text()
    )
    assert readers == []
    assert "lab.process_mode" in (ROOT / "__main__.py").read_text()


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
