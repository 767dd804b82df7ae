"""What `make up` checks for a process-mode stack before `pulumi up`: every program it runs is built.

The control planes' programs and the Pulumi engine with its Python language host and the Kubernetes
provider come from `make tools` (./bin, or GPULAB_BIN); HAMi's scheduler of each release the stack's tenants
name (hamiVersion) from GPULAB_HAMI_SCHEDULER_<RELEASE>, GPULAB_HAMI_SCHEDULER or ./bin (process_lab/hami_binary.py),
since the Go module proxy refuses HAMi (tools/README.md). One line per missing
fix, each saying what to do; exit 1 if any is missing. `--destroy` checks what `make down` runs: it
starts no HAMi, so a lab whose hami-scheduler is gone (or set in another shell) can still be taken down.
Usage: python -m process_lab.preflight [--destroy] [--stack NAME]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from boundary.bounded_run import run_bounded
from model.hami_releases import DEFAULT_VERSION as DEFAULT_HAMI_VERSION
from process_lab import hami_binary
from process_lab.control_plane import missing_programs

ROOT = Path(__file__).resolve().parents[1]
# The engine, the language host that runs gpulab's Python program (and its two scripts), and the provider.
ENGINE = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-language-python-exec",
    "pulumi-resource-pulumi-python",
    "pulumi-resource-kubernetes",
)
NODE_PROGRAMS = ("kubeadm", "kubelet")  # kubeadm's phases on this host; both are in the node image too
DOCKER_TIMEOUT = 30  # seconds for one docker command: an engine that answers does in well under one
DRA_PLUGIN_LABEL = "gpulab.io/node-image.dra-plugin"  # node-image/build.sh: sha256:<the plugin's bytes>
HAMI_PLUGIN_LABEL = "gpulab.io/node-image.hami-plugin"  # the same, for gpulab-hami-plugin


def bin_dir() -> Path:
    return Path(os.environ.get("GPULAB_BIN") or ROOT / "bin").resolve()


def programs_missing(tools: Path) -> list[str]:
    """What `pulumi up` of a process-mode stack starts and does not find (the program checks the same)."""
    return missing_programs(tools)


def hami_missing(tools: Path, versions: tuple[str, ...]) -> list[str]:
    """`hami-scheduler (HAMi <release>)` for each release a tenant names that has no binary."""
    return [f"hami-scheduler (HAMi {v})" for v in versions if hami_binary.find(tools, v).path is None]


def problems(
    tools: Path,
    *,
    destroy: bool = False,
    hami_versions: tuple[str, ...] = (DEFAULT_HAMI_VERSION,),
    node_images: tuple[str, ...] = (),
    dra_images: tuple[str, ...] = (),
    hami_images: tuple[str, ...] = (),
) -> list[str]:
    """One line per fix: programs `make tools` builds, HAMi's scheduler of each release a tenant runs
    (`hami_versions`; none when the stack leaves HAMi out, nor for a destroy), and for real nodes a Docker engine
    and the node image (`make node-image`), with gpulab's DRA kubelet plugin in the images of DRA tenants' nodes
    (`dra_images`) and gpulab's HAMi device plugin in those of HAMi tenants' nodes (`hami_images`)."""
    lines = []
    missing = [*missing_programs(tools), *(name for name in ENGINE if not os.access(tools / name, os.X_OK))]
    if node_images:
        missing += [name for name in NODE_PROGRAMS if not os.access(tools / name, os.X_OK)]
    if missing:
        lines.append(f"not built in {tools}: {', '.join(missing)}: run `make tools` (from pinned Go modules)")
    if not destroy:
        for version in hami_versions:
            if (problem := hami_binary.find(tools, version).problem) is not None:
                lines.append(
                    f"{problem} (the Go module proxy refuses HAMi), or leave HAMi out with scheduling.scheduler: "
                    "kube-scheduler"
                )
    if node_images:
        lines += docker_problems(node_images, destroy, dra_images, tools, hami_images)
    return lines


def docker_problems(
    images: tuple[str, ...],
    destroy: bool,
    dra_images: tuple[str, ...],
    tools: Path,
    hami_images: tuple[str, ...] = (),
) -> list[str]:
    """Real nodes need a Docker engine that answers and, to be made, gpulab's node image; a DRA tenant's node an
    image holding gpulab's DRA kubelet plugin, a HAMi tenant's node one holding gpulab's HAMi device plugin
    (node-image/build.sh labels the image with each plugin's sha256)."""
    try:
        answer = run_bounded(["docker", "info"], DOCKER_TIMEOUT)
    except OSError as error:
        return [f"workers: containers needs a Docker engine, and `docker info` could not run ({error})"]
    if answer.timed_out:
        return [f"workers: containers needs a Docker engine, and `docker info` did not answer in {answer.waited:g} s"]
    if answer.returncode != 0:
        return [
            "workers: containers needs a Docker engine, and `docker info` failed: start Docker (as root on a "
            "machine without one: bash hack/docker-engine.sh start)"
        ]
    if destroy:
        return []
    absent = [image for image in images if not run_bounded(["docker", "image", "inspect", image], DOCKER_TIMEOUT).ok]
    lines = [f"the node image {image} is not in the Docker engine: run `make node-image`" for image in absent]
    plugins = (
        (dra_images, DRA_PLUGIN_LABEL, "gpulab-dra-plugin", "the DRA kubelet plugin a gpuSharing: dra tenant's node"),
        (hami_images, HAMI_PLUGIN_LABEL, "gpulab-hami-plugin", "HAMi's device plugin a HAMi tenant's real node"),
    )
    for wanted, label, program, role in plugins:
        for image in (image for image in wanted if image not in absent):
            lines += _plugin_problems(image, label, tools / program, role)
    return lines


def _plugin_problems(image: str, label: str, built: Path, role: str) -> list[str]:
    """The node image's label of a plugin (sha256 of its bytes) against the plugin `make tools` built."""
    labels = run_bounded(["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", image], DOCKER_TIMEOUT)
    found = (json.loads(labels.stdout or b"null") or {}).get(label) if labels.ok else None
    if not found:
        return [
            f"the node image {image} carries no {built.name} label, so it may lack {role} runs (an image made "
            "before the label): run `make tools node-image`"
        ]
    if built.is_file() and found != f"sha256:{hashlib.sha256(built.read_bytes()).hexdigest()}":
        return [
            f"the node image {image} holds another {built.name} than {built} (built since the image was "
            "made): run `make node-image`"
        ]
    return []


def stack_needs(stack: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(the HAMi releases the stack runs, the node images its node containers run, those of them DRA tenants' nodes
    run, those of them HAMi tenants' nodes run) from its stack file."""
    from model.config.loading import load_stack_file

    lab = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    if not lab.real_nodes:
        return lab.hami_versions, (), (), ()
    images = tuple(sorted({lab.worker_image(t) or "" for t in lab.tenants}))
    dra_images = tuple(sorted({lab.worker_image(t) or "" for t in lab.tenants if t.gpu_sharing == "dra"}))
    hami_images = tuple(sorted({lab.worker_image(t) or "" for t in lab.tenants if lab.runs_hami(t) and t.cards()}))
    return lab.hami_versions, images, dra_images, hami_images


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m process_lab.preflight")
    parser.add_argument("--destroy", action="store_true")
    parser.add_argument("--stack", help="read what this stack needs (HAMi, node containers) from its file")
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as usage:  # argparse's own exit (2 for a wrong argument), returned as an exit code
        return int(usage.code or 0)
    needs = stack_needs(args.stack) if args.stack else ((DEFAULT_HAMI_VERSION,), (), (), ())
    hami, images, dra_images, hami_images = needs
    found = problems(
        bin_dir(),
        destroy=args.destroy,
        hami_versions=hami,
        node_images=images,
        dra_images=dra_images,
        hami_images=hami_images,
    )
    for line in found:
        print(f"[gpulab] {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
