"""The layout shows the architecture: the model at the ground floor, the ComponentResources
and the policy pack beside each other on it, the tools on top. Checked on the imports themselves."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from shared_data import ROOT

from model.wings import WINGS

PACKAGES = (
    "hami",
    "boundary",
    "model",
    "components",
    "placement",
    "policies",
    "process_lab",
    "scripts",
    "hack",
    "tools",
    "preview",
    "report",
    "diagnose",
    "benchmarks",
)
# Every arrow that may exist between gpulab's packages: which each may import. components and policies never
# import each other; process_lab (local programs: no SDK) sits below the components that drive it.
ALLOWED = {
    "hami": set(),  # HAMi's semantics: nothing of gpulab's
    "boundary": set(),  # programs, downloads, Kubernetes API, Pulumi's state, users' YAML: nothing of the lab's
    # Of hami/, only its names: the keys and readers of HAMi's annotations and the reason names, which the admission
    # policy's messages are built from (test_the_model_takes_of_hami_only_its_names).
    "model": {"hami", "boundary"},
    "placement": {"model", "hami", "boundary"},  # the engine: HAMi's rules walked over pods, orders and nodes
    "policies": {"model", "hami", "placement", "boundary"},  # the pack and `make check`
    "process_lab": {"model", "placement", "hami", "boundary"},  # the differential asks the engine what HAMi would do
    "components": {"model", "process_lab", "boundary"},
    "scripts": {"model", "hami"},  # hami.annotations: the register annotation's reader (standard library only)
    "hack": {"model", "boundary"},
    # `make tools` runs with the host's python3, before ./venv: standard library only, and of gpulab's only
    # boundary's bounded_run and downloads (standard library too; test_tools_takes_only_what_the_host_python_has)
    "tools": {"boundary"},
    "report": {"model", "hami", "boundary"},  # HAMi's annotations, counted as the tenant's release counts them
    "preview": {"model", "policies", "placement", "hami", "process_lab"},  # runs the program and the pack
    # the components' names; process mode's processes; HAMi's node lock and reason names
    "diagnose": {"model", "components", "process_lab", "hami", "boundary"},
    "benchmarks": {"model", "placement", "hami", "process_lab", "boundary"},  # the engine, never the pack
}
# Each wing's components in a folder of its own, named as its row in model/wings.py (kind's
# pkg/cluster/internal/providers/<provider>): no folder imports another, and what they share (components/*.py) imports
# none, but the registry, components/wings.py, which takes each folder's one entry (lab.py) and which __main__.py asks
# once. A state made before the folders is upgraded by process_lab/state_upgrade.py: no module stays at the old paths.
RUNTIME_FOLDERS = tuple(WINGS)
WING_REGISTRY = "wings"
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
    """The components modules a component imports, as dotted paths under components."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("components."):
            found.add(node.module.removeprefix("components."))
    return found


def runtime_of(module: str) -> str:
    """ "docker.tenant_worker" -> "docker"; "parts" -> "shared"."""
    return module.split(".")[0] if "." in module else "shared"


def test_each_component_belongs_to_one_runtime_or_to_all() -> None:
    """components/docker never imports components/process, nor process_lab; components/process never imports
    components/docker, nor the Docker or command provider; the shared modules import no runtime's folder."""
    folders = {path.parent.name for path in (ROOT / "components").rglob("*.py")} - {"components", "__pycache__"}
    assert folders <= set(RUNTIME_FOLDERS), f"a folder of components that is no runtime: {sorted(folders)}"
    wrong = []
    for path in sorted((ROOT / "components").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT / "components").with_suffix("").parts)
        runtime = runtime_of(module)
        taken = component_imports(path) - ({f"{wing}.lab" for wing in WINGS} if module == WING_REGISTRY else set())
        reached = {runtime_of(other) for other in taken} - {runtime, "shared"}
        wrong += [f"components/{module} imports components/{other}" for other in sorted(reached)]
        if runtime != "process" and "process_lab" in imports(path):
            wrong.append(f"components/{module} imports process_lab")
        if runtime == "process":
            wrong += [
                f"components/{module} imports {sdk}" for sdk in imports(path) & {"pulumi_docker", "pulumi_command"}
            ]
    assert not wrong, wrong


# The `__provider` records a state made at 3844687 (before components/process/) holds: serialize_provider's output
# there, for each of process mode's providers.
RECORDS_BEFORE_THE_FOLDERS = {
    "ControlPlaneProvider": (
        "gASVPAAAAAAAAACMHGNvbXBvbmVudHMucHJvY2Vzc19yZXNvdXJjZXOUjBRDb250cm9sUGxhbmVQcm92aWRlcpSTlCmBlC4="
    ),
    "KwokNodesProvider": (
        "gASVOQAAAAAAAACMHGNvbXBvbmVudHMucHJvY2Vzc19yZXNvdXJjZXOUjBFLd29rTm9kZXNQcm92aWRlcpSTlCmBlC4="
    ),
    "HamiProvider": ("gASVNAAAAAAAAACMHGNvbXBvbmVudHMucHJvY2Vzc19yZXNvdXJjZXOUjAxIYW1pUHJvdmlkZXKUk5QpgZQu"),
    "GpuInventoryProvider": (
        "gASVPAAAAAAAAACMHGNvbXBvbmVudHMucHJvY2Vzc19yZXNvdXJjZXOUjBRHcHVJbnZlbnRvcnlQcm92aWRlcpSTlCmBlC4="
    ),
    "LabNetworkProvider": (
        "gASVPwAAAAAAAACMIWNvbXBvbmVudHMubm9kZV9jb250YWluZXJfd29ya2Vyc5SMEkxhYk5ldHdvcmtQcm92aWRlcpSTlCmBlC4="
    ),
    "NodeContainerProvider": (
        "gASVQgAAAAAAAACMIWNvbXBvbmVudHMubm9kZV9jb250YWluZXJfd29ya2Vyc5SMFU5vZGVDb250YWluZXJQcm92aWRlcpSTlCmBlC4="
    ),
}


@pytest.mark.parametrize("name", RECORDS_BEFORE_THE_FOLDERS)
def test_an_older_states_provider_record_is_upgraded_to_todays(name: str) -> None:
    """process_lab/state_upgrade.py turns each record an older state holds into the one the engine writes today
    for the same provider (serialize_provider of today's class), with no module left at the old paths."""
    import base64
    import importlib
    import importlib.util

    from pulumi.dynamic.dynamic import serialize_provider

    from process_lab import state_upgrade

    old = RECORDS_BEFORE_THE_FOLDERS[name]
    assert state_upgrade.stale(old)
    (old_module, _), today = next((key, module) for key, module in state_upgrade.MOVED.items() if key[1] == name)
    assert importlib.util.find_spec(old_module) is None, f"{old_module} is back: the upgrade makes it unneeded"
    new = state_upgrade.upgraded(old)
    assert new == serialize_provider(getattr(importlib.import_module(today), name)())
    assert not state_upgrade.stale(new) and today.encode() in base64.b64decode(new)


def test_every_dynamic_provider_says_its_path_is_in_the_state() -> None:
    """A provider class's module path is part of every state that holds one of its resources: each says so where a
    mover reads it, and every class a move left behind has its entry in the upgrade's table."""
    from process_lab import state_upgrade

    silent = []
    for path in sorted((ROOT / "components").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            provider = isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", "") == "ResourceProvider" for b in node.bases
            )
            if provider and "state_upgrade" not in (ast.get_docstring(node) or ""):
                silent.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert not silent, f"say in each class docstring that its path is in the state (state_upgrade.py): {silent}"
    assert {name for _, name in state_upgrade.MOVED} == set(RECORDS_BEFORE_THE_FOLDERS)


def test_each_wing_is_its_folder_one_registry_line_and_one_traits_row() -> None:
    """components/wings.py registers, under each name of model/wings.py's table, the one entry of the folder of that
    name (components/<wing>/lab.py), and __main__.py alone asks it: a wing is added where the others are read."""
    from components.wings import BUILDERS

    assert set(BUILDERS) == set(WINGS)
    assert {name: build.__module__ for name, build in BUILDERS.items()} == {w: f"components.{w}.lab" for w in WINGS}
    folders = {path.name for path in (ROOT / "components").iterdir() if (path / "__init__.py").is_file()}
    assert folders == set(WINGS), sorted(folders)
    registry = re.compile(r"\bcomponents(\.| import )wings\b")
    outside_tests = [path for path in python_files() if ROOT / "tests" not in path.parents]
    askers = [str(path.relative_to(ROOT)) for path in outside_tests if registry.search(path.read_text())]
    assert askers == ["__main__.py"], askers


def asks_which_wing(path: Path) -> list[str]:
    """Where a module asks which wing a lab is: `process_mode` by any spelling, or a `.runtime` read (Pulumi's
    own `pulumi.runtime` aside)."""
    text = path.read_text(errors="replace")
    found = [f"{n}: process_mode" for n, line in enumerate(text.splitlines(), 1) if re.search(r"process_mode", line)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and node.attr == "runtime" and getattr(node.value, "id", "") != "pulumi":
            found.append(f"{node.lineno}: .runtime")
    return found


def test_no_module_outside_the_config_asks_which_wing_a_lab_is() -> None:
    """Outside model/config (whose own rules keep `process_mode`), every module asks a wing's traits
    (`lab.wing.system_workloads`, ...), never which wing it is: a new wing is then one row, not a hunt for branches."""
    config = ROOT / "model" / "config"
    files = [path for path in python_files() if config not in path.parents and ROOT / "tests" not in path.parents]
    assert ROOT / "__main__.py" in files and ROOT / "diagnose" / "collect.py" in files
    found = {str(path.relative_to(ROOT)): asked for path in files if (asked := asks_which_wing(path))}
    assert not found, f"ask the wing's traits (model/wings.py, lab.wing) instead: {found}"
    assert asks_which_wing(config / "lab.py"), "the config's own rules ask it: the check reads the right spelling"


def model_folders_taken(paths: list[Path], folders: tuple[str, ...]) -> list[str]:
    """Each import by one of `paths` of a module under model/<folder>/, for each of `folders`."""
    taken = [f"model.{folder}" for folder in folders]
    return sorted(
        {
            f"{path.relative_to(ROOT)} imports {name}"
            for path in paths
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            for name in [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            if any(name == folder or name.startswith(f"{folder}.") for folder in taken)
        }
    )


def test_the_model_s_ground_stands_under_its_folders_and_only_the_docker_wing_takes_the_docker_lab_s() -> None:
    """model/kube_objects/ (what every wing puts in a tenant) and model/docker_lab/ (Kamaji, kube-proxy, the pull
    policy, images, sources: the Docker lab's) stand on the model's ground (model/*.py, model/config/), which imports
    neither; and neither process mode's components nor process_lab/ import the Docker lab's."""
    ground = [path for path in sources("model") if not {"kube_objects", "docker_lab"} & set(path.parts)]
    process = sources("process_lab") + sorted((ROOT / "components" / "process").rglob("*.py"))
    wrong = model_folders_taken(ground, ("kube_objects", "docker_lab")) + model_folders_taken(process, ("docker_lab",))
    assert not wrong, wrong


def test_the_model_imports_no_pulumi_or_kubernetes_sdk_when_imported() -> None:
    """The policy pack's venv has none of them; where the model or the boundary needs one (load_config,
    api_client) it imports it inside the function that runs only in the program or a live tool."""
    below = sources("model") + sources("boundary")
    wrong = {f"{path.relative_to(ROOT)}: {sdk}" for path in below for sdk in imports(path, True) & set(SDKS)}
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
    """hami/ imports only the standard library (no SDK, nothing of gpulab's), and names the HAMi
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


def test_the_placement_engine_words_nothing() -> None:
    """The engine's modules return verdicts: only placement/wording.py makes what users read (findings.Finding)."""
    worded = {"placement.wording", "placement.findings"}
    found = set()
    for path in sources("placement"):
        if path.name in ("wording.py", "findings.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
                found |= {f"{path.name} imports {name}" for name in names & worded}
            elif isinstance(node, ast.Import):
                found |= {f"{path.name} imports {a.name}" for a in node.names if a.name in worded}
    assert not found, sorted(found)


def test_tools_takes_only_what_the_host_python_has() -> None:
    """tools/build.py (and tools/releases.py, which it runs) run before ./venv exists: the boundary modules they
    import import the standard library only, and boundary/__init__.py imports nothing."""
    import sys

    taken, others = set(), set(PACKAGES) - {"tools"}
    for path in ("tools/build.py", "tools/releases.py"):
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in others:
                taken |= {node.module} if "." in node.module else {f"{node.module}.{a.name}" for a in node.names}
    assert taken == {"boundary.bounded_run", "boundary.downloads"}, taken
    for module in ("boundary/__init__.py", "boundary/bounded_run.py", "boundary/downloads.py"):
        outside = imports(ROOT / module) - set(sys.stdlib_module_names) - {"__future__"}
        assert not outside, (module, outside)


def test_the_boundary_imports_only_the_standard_library_when_imported() -> None:
    """The host's python3 runs boundary/ before ./venv exists (make tools, make's own scripts): at import time its
    modules take the standard library only, and safe_yaml PyYAML, which the policy pack's venv has too."""
    import sys

    allowed = set(sys.stdlib_module_names) | {"__future__", "boundary"}
    wrong = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources("boundary")
        for name in imports(path, True) - allowed - ({"yaml"} if path.name == "safe_yaml.py" else set())
    }
    assert not wrong, sorted(wrong)


# What tests/ holds beside the mirrors of the packages: tiers (real, acceptance), helpers (support), data.
TEST_FOLDERS_NOT_PACKAGES = {"real", "acceptance", "support", "fakes", "fixtures", "manifests", "snapshots"}
PROJECT_WIDE_TESTS = {"test_layout", "test_docs", "test_real_tier", "test_property_budget", "test_acceptance_helpers"}
PROJECT_WIDE_TESTS |= {"test_upstream_data", "test_tiers", "test_doc_images"}


def test_the_tests_of_a_package_are_in_its_folder_of_tests() -> None:
    """tests/<package>/ holds a package's tests (node_image/: node-image/'s scripts), so a reader goes from code to
    its tests by path; only the tests of the project as a whole stand at tests/."""
    folders = {path.name for path in (ROOT / "tests").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders - TEST_FOLDERS_NOT_PACKAGES <= {*PACKAGES, "node_image"}, sorted(folders)
    at_top = {path.stem for path in (ROOT / "tests").glob("test_*.py")}
    assert at_top == PROJECT_WIDE_TESTS, sorted(at_top ^ PROJECT_WIDE_TESTS)


def test_every_project_root_a_module_computes_is_the_project() -> None:
    """A module that finds the project from its own path (`Path(__file__)...`) must land on it at the depth it has now:
    components/docker/sources.py, moved one folder down, once put a relative source cache under components/."""
    import importlib
    import importlib.util

    wrong = []
    for package in PACKAGES:
        for path in sources(package):
            if not re.search(r"^(ROOT|PROJECT|REPO|HERE)\s*=\s*Path\(__file__\)", path.read_text(), re.MULTILINE):
                continue
            module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
            for name in ("ROOT", "PROJECT"):
                value = getattr(module, name, None)
                if isinstance(value, Path) and value.resolve() != ROOT.resolve():
                    wrong.append(f"{path.relative_to(ROOT)}: {name} = {value}")
    assert not wrong, wrong


# --- one definition of each of HAMi's annotations and of each reason name ------------------------------------------
HAMI_NAMES = ("hami.reasons", "hami.annotations")  # what model/ may take of hami/: modules that import nothing
# Modules owned elsewhere that still spell keys or reason names of their own, each with what it should take from
# hami/annotations.py or hami/reasons.py instead; each leaves this list once it does.
NOT_YET: dict[str, str] = {}


def test_the_model_takes_of_hami_only_its_names() -> None:
    """model/ imports of hami/ only HAMI_NAMES, and those import the standard library only: the model knows HAMi's
    annotations and reason names, none of its scheduling semantics."""
    import sys

    wrong = set()
    for path in sources("model"):
        for node in ast.walk(ast.parse(path.read_text())):
            taken = [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            taken += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            hami = [name for name in taken if name.split(".")[0] == "hami" and name not in HAMI_NAMES]
            wrong |= {f"{path.relative_to(ROOT)} imports {name}" for name in hami}
    for name in HAMI_NAMES:
        outside = imports(ROOT / f"{name.replace('.', '/')}.py") - set(sys.stdlib_module_names) - {"__future__"}
        wrong |= {f"{name} imports {other}" for other in outside}
    assert not wrong, sorted(wrong)


def spelled(path: Path, words: set[str]) -> set[str]:
    """The `words` a module's string literals (docstrings aside) spell, each as a whole word."""
    tree = ast.parse(path.read_text())
    documented = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    texts = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented
    ]
    return {word for word in words if any(re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", t) for t in texts)}


def test_each_hami_annotation_key_and_reason_name_is_spelled_once() -> None:
    """hami/annotations.py spells HAMi's annotation keys (and reads their values), hami/reasons.py the reason names;
    every other module takes them from there, so that the engine, the pack, the admission policy's messages, the
    report and diagnose cannot disagree."""
    from hami import annotations, reasons

    keys = {value for value in vars(annotations).values() if isinstance(value, str) and value.startswith("hami.io/")}
    names = {value for key, value in vars(reasons).items() if key.isupper() and isinstance(value, str)}
    assert len(keys) >= 8 and len(names) >= 30
    homes = {ROOT / "hami" / "annotations.py": names, ROOT / "hami" / "reasons.py": keys}
    found = {}
    for package in PACKAGES:
        for path in sources(package):
            if "tests" in path.relative_to(ROOT).parts:
                continue
            if str(path.relative_to(ROOT)) not in NOT_YET and (extra := spelled(path, homes.get(path, keys | names))):
                found[str(path.relative_to(ROOT))] = sorted(extra)
    assert not found, found
    done = [path for path in NOT_YET if not spelled(ROOT / path, keys | names)]
    assert not done, f"{done} spell none of them any more: take them off NOT_YET"


# --- entry points run as modules: no edit of the import path ---------------------------------------------------------
# Every Python entry point runs as a module from the project folder (`python3 -m hack.stack_state`, `python -m
# benchmarks.hami_filter`, `python3 -m tools.build`), and the tests find gpulab's packages and their helpers by
# pytest's `pythonpath` (pyproject.toml). An edit of the path stays only where neither reaches, each file here with
# why and how many edits it holds.
PATH_EDITS_KEPT = {
    # The Pulumi CLI runs the pack by its path from policies/, with policies/venv (`python -u -m pulumi.policy ENGINE
    # .`, which runpy.run_path's this file): no `-m` of gpulab's, and no .pth in a venv the CLI may make itself.
    "policies/__main__.py": 1,
    # A fake the code under test runs by its path as `kubectl` (a control plane's bin folder), from any folder; it
    # shares tests/support/fake_kube_api.py's store with the fake API server.
    "tests/fakes/kube-api/kubectl": 1,
}
# An insert, append or extend on the path, a slice or item assigned into it, or the path replaced or added to; and
# site.addsitedir, which adds a folder the same way.
PATH_EDIT = re.compile(
    r"\bsys\.path\s*(?:\.\s*(?:insert|append|extend)\s*\(|\[[^\]]*\]\s*=(?!=)|\+=|=(?!=))|\bsite\.addsitedir\s*\("
)
NOT_THE_PROJECT = {"venv", ".venv", "node_modules", "__pycache__"}  # and every hidden folder (.cache, .git)


def is_python(path: Path) -> bool:
    """A .py file, or a program whose first line asks for python (the fakes, hack/runc-without-sys-resource)."""
    if path.suffix == ".py":
        return True
    try:
        with path.open("rb") as file:
            first = file.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def python_files() -> list[Path]:
    """Every Python file of the project, tests included: not the venvs, nor what .cache holds."""
    found = []
    for folder, folders, files in os.walk(ROOT):
        folders[:] = [name for name in folders if name not in NOT_THE_PROJECT and not name.startswith(".")]
        found += [path for name in files if is_python(path := Path(folder) / name)]
    return sorted(found)


def path_edits(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if PATH_EDIT.search(line)
    ]


SYS_PATH = "sys" + ".path"  # spelled apart: the examples below are no edit of this file's own


@pytest.mark.parametrize(
    ("line", "edits"),
    [
        (f"{SYS_PATH}.insert(0, str(ROOT))", True),
        (f"{SYS_PATH}.append(folder)", True),
        (f"{SYS_PATH} . extend([a, b])", True),
        (f"{SYS_PATH}[:0] = [str(ROOT)]", True),
        (f"{SYS_PATH} = [ROOT, *sys.path]", True),
        (f"{SYS_PATH} += [ROOT]", True),
        (f'"import sys; {SYS_PATH}.insert(0, sys.argv[1])"', True),  # a child's script, as a string
        ("site" + ".addsitedir(folder)", True),
        (f"if str(ROOT) not in {SYS_PATH}:", False),
        (f"assert {SYS_PATH}[0] == str(ROOT)", False),
        (f"print({SYS_PATH})", False),
    ],
)
def test_the_path_edit_pattern_knows_an_edit_from_a_read(line: str, edits: bool) -> None:
    assert bool(PATH_EDIT.search(line)) is edits


def test_no_file_edits_the_import_path_but_the_ones_kept() -> None:
    """Run as modules, no entry point needs an edit: one puts a folder first on the path, where a module of it can
    shadow a package of the same name (benchmarks/process_lab.py and the process_lab package)."""
    files = python_files()
    assert len(files) > 300 and ROOT / "tests" / "fakes" / "kube-api" / "kubectl" in files, len(files)
    found = {str(path.relative_to(ROOT)): edits for path in files if (edits := path_edits(path))}
    unexpected = [edit for name, edits in found.items() if name not in PATH_EDITS_KEPT for edit in edits]
    assert not unexpected, f"run it as a module (python -m package.module) instead: {unexpected}"
    counts = {name: len(found.get(name, [])) for name in PATH_EDITS_KEPT}
    assert counts == PATH_EDITS_KEPT, f"a kept edit changed or went: update PATH_EDITS_KEPT ({counts})"
