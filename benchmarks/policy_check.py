"""Time to judge GPU pods with the policy logic: bulk (10,000 pods, 50 tenants) and adversarial small cases.

A benchmark, not a test: it prints timings. Run with `make bench`.

- bulk: 10,000 single-container pods across 50 tenants of 16 to 32 A100s, timed with today's code and,
  in the same run, with the policy code as it was before the HAMi-exact rewrite (commit BASELINE,
  read from git; skipped with a line when git or the commit is not there), and the ratio;
- adversarial: one tenant with 3 to 5 cards of mixed sizes and six pods of one or two containers
  (percentages, 2-card requests), the shape that once took 15 s in one call; the slowest call and
  how often the search budget ran out (reported in the findings as PlacementUndecided).

Where the time went (profiled on the baseline, 3-5 s): an exhaustive search per pod "alone" (10,100
searches, each canonicalising the node state), HAMi's greedy walk simulated for 8 orders and
policies with a node copy per pod, and a linear walk retrying greedy twice per pod. Now: identical
pods are decided once, a first-fit placement (HAMi's per-card rules) proves "fits" without a search,
a pigeonhole bound proves "no order strands" without simulating, and the walk to the first pod that
does not fit keeps one placement and searches only where first fit fails.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from benchmarks import multinode_check
from benchmarks.multinode_check import pod
from boundary.bounded_run import run_text
from hami.cards import CardSpec
from model.config import GpuQuota, PodLimits
from placement.findings import UNDECIDED
from placement.inventory import TenantInventory

ROOT = Path(__file__).resolve().parent.parent

BASELINE = "57a5746"  # the last commit of the first placement engine (policies 700 us/pod)
BASELINE_MODULES = ("gpu_fit", "inventory", "workloads", "evaluate")


def bulk_case(tenants: int, pods: int, seed: int) -> tuple[list[tuple[str, int]], dict[str, list[dict]]]:
    rng = random.Random(seed)
    shapes = [(f"t{i}", rng.choice([16, 24, 32])) for i in range(tenants)]
    manifests: dict[str, list[dict]] = {name: [] for name, _ in shapes}
    for i in range(pods):
        manifests[shapes[i % tenants][0]].append(pod(f"p{i}", rng))
    return shapes, manifests


def run_bulk(package: dict[str, ModuleType], shapes, manifests) -> tuple[float, int]:
    """Seconds to evaluate every tenant (reading the manifests is not timed), and the error count."""
    card, inventory_type = package["gpu_fit"].CardSpec, package["inventory"].TenantInventory
    inputs = []
    for name, count in shapes:
        cards = tuple(card(f"{name}-gpu-{i}", "NVIDIA-A100-SXM4-80GB", 81920) for i in range(count))
        inventory = inventory_type(name, cards, PodLimits(), GpuQuota(), ("gpu",), "spread")
        inputs.append((inventory, [package["workloads"].read_workload("Pod", m) for m in manifests[name]]))
    started = time.perf_counter()
    findings = [f for inventory, workloads in inputs for f in package["evaluate"].evaluate_tenant(inventory, workloads)]
    return time.perf_counter() - started, sum(f.severity == "error" for f in findings)


def baseline_package() -> dict[str, ModuleType] | str:
    """The baseline policy modules, loaded from git under another package name; or why not."""
    directory = Path(tempfile.mkdtemp(prefix="gpulab-bench-"))
    atexit.register(shutil.rmtree, directory, True)  # the modules stay loaded; their files go with the process
    package = directory / "policies_baseline"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module in BASELINE_MODULES:
        shown = run_text(["git", "-C", str(ROOT), "show", f"{BASELINE}:policies/{module}.py"], 60)
        if shown.returncode != 0:
            return f"baseline {BASELINE} not available ({shown.stderr.strip()[:80] or 'git failed'})"
        # The baseline's model imports (components.catalog, components.config) live in model/ now.
        source = shown.stdout.replace("from policies.", "from policies_baseline.")
        source = source.replace("from components.", "from model.")
        (package / f"{module}.py").write_text(source)
    # The package from its folder, under its own name (no sys.path entry): its modules import each other as
    # policies_baseline.X, which the package's __path__ finds.
    spec = importlib.util.spec_from_file_location(
        "policies_baseline", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        return f"baseline {BASELINE}: its package at {package} cannot be loaded"
    sys.modules["policies_baseline"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["policies_baseline"])
    return {module: importlib.import_module(f"policies_baseline.{module}") for module in BASELINE_MODULES}


def adversarial_case(rng: random.Random) -> tuple[TenantInventory, list]:
    cards = tuple(
        CardSpec(f"g{i}", "NVIDIA-X", rng.choice([16384, 24576, 49152, 81920])) for i in range(rng.randint(3, 5))
    )
    inventory = TenantInventory("t", cards, PodLimits(), None, (), "spread")
    workloads = multinode_check.adversarial_pods(rng)
    return inventory, workloads


def progress(message: str) -> None:
    """What is being measured now, on stderr (the results stay alone on stdout)."""
    print(f"  ... {message}", file=sys.stderr, flush=True)


def run_adversarial(cases: int, seed: int) -> tuple[float, int]:
    return multinode_check.run_adversarial(cases, seed, adversarial_case, progress)


def main(tenants: int = 50, pods: int = 10_000, seed: int = 7, adversarial: int = 200, baseline: bool = True) -> None:
    import hami.cards
    import placement.inventory
    import placement.wording
    import placement.workloads

    current = {
        "gpu_fit": hami.cards,
        "inventory": placement.inventory,
        "workloads": placement.workloads,
        "evaluate": placement.wording,
    }
    shapes, manifests = bulk_case(tenants, pods, seed)
    progress(f"{pods} pods with today's code")
    elapsed, errors = run_bulk(current, shapes, manifests)
    print(f"{pods} pods across {tenants} tenants: {elapsed:.2f} s ({1e6 * elapsed / pods:.0f} us/pod), {errors} errors")
    old = baseline_package() if baseline else "baseline skipped"
    if isinstance(old, str):
        print(f"  {old}")
    else:
        progress(f"the same pods with the baseline {BASELINE} (slower: that is the point)")
        old_elapsed, old_errors = run_bulk(old, shapes, manifests)
        print(
            f"  baseline {BASELINE}: {old_elapsed:.2f} s, {old_errors} errors; "
            f"today's code is {old_elapsed / elapsed:.1f}x faster"
        )
    if adversarial:
        progress(f"{adversarial} adversarial small cases")
        slowest, undecided = run_adversarial(adversarial, seed)
        print(
            f"{adversarial} adversarial small cases: slowest call {slowest:.2f} s, "
            f"search budget ran out in {undecided} (reported as {UNDECIDED})"
        )
    # Tenants with several GPU nodes: benchmarks/multinode_check.py.
    multinode_check.main(tenants=tenants, pods=pods, seed=seed, adversarial=adversarial)


if __name__ == "__main__":
    main()
