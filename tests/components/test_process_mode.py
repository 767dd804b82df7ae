"""Process mode (`runtime: process`, Pulumi.sim.yaml): the program's graph on local processes, its config
rules, and the process plumbing its dynamic providers stand on.

Boundaries each test stands for:
- the Pulumi engine: the program under Pulumi mocks, as `pulumi up --stack sim` registers it (the real engine
  ran it in the process lab: docs/process-lab.md);
- kwokctl v0.8.0: left to itself it gives two clusters created at the same moment the same ports (seen with
  the real kwokctl under `pulumi up`, where Pulumi creates tenants in parallel), so gpulab chooses every port;
- the engine's process group: the engine kills a dynamic provider's process group when it closes the
  provider, and programs may ignore TERM, so long-running processes start in a session of their own and
  stop with TERM, then KILL.
"""

from __future__ import annotations

import base64
import contextlib
import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT, ROOT, run_program, stack_keys

from model.config import ConfigError, parse_config
from model.hami_releases import DEFAULT_VERSION, KNOWN_VERSIONS
from process_lab.commands import free_port, is_ours, start_detached, stop_session
from process_lab.control_plane import PORT_OPTIONS, PROGRAMS, cluster_configuration, kwokctl_configuration

DYNAMIC = "pulumi-python:dynamic:Resource"


def sim_config() -> dict:
    """The tests' own copy of Pulumi.sim.yaml (users edit the checkout's stack files)."""
    return stack_keys(LAB_PROJECT / "Pulumi.sim.yaml")


@pytest.fixture
def built_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ./bin with every program process mode needs (empty executables: the program only checks they exist), with
    a hami-scheduler of each release under its release's name (one that does not say which it is)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in (*PROGRAMS, *(f"hami-scheduler-{version}" for version in KNOWN_VERSIONS)):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("GPULAB_BIN", str(bin_dir))
    monkeypatch.delenv("GPULAB_HAMI_SCHEDULER", raising=False)
    return bin_dir


# --- config -----------------------------------------------------------------------------------------------


def test_the_sim_stack_is_the_reference_case_of_the_dev_stack() -> None:
    """Pulumi.sim.yaml runs the seed's case: the same tenants, cards, limits, quotas and namespaces as dev."""
    dev = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())["config"]
    sim = yaml.safe_load((LAB_PROJECT / "Pulumi.sim.yaml").read_text())["config"]
    keys = ("name", "gpus", "limits", "quota", "namespaces", "workloads")
    assert [{k: t.get(k) for k in keys} for t in sim["gpulab:tenants"]] == [
        {k: t.get(k) for k in keys} for t in dev["gpulab:tenants"]
    ]
    assert sim["gpulab:runtime"] == "process" and "gpulab:runtime" not in dev
    assert parse_config(sim_config()).process_mode


@pytest.mark.parametrize(
    ("change", "key", "value"),
    [
        (
            lambda c: c["tenants"][1].update(workerMode="ssh", workers=[{"host": "10.0.0.2"}]),
            "tenants[1].workerMode",
            "ssh",
        ),
        (lambda c: c["tenants"][0].update(gpuMode="real"), "tenants[0].gpuMode", "real"),
        (lambda c: c.update(runtime="podman"), "runtime", "podman"),
    ],
)
def test_what_process_mode_cannot_run_is_refused_by_key_and_value(change, key: str, value: str) -> None:
    config = sim_config()
    change(config)
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    message = str(raised.value)
    assert f"gpulab:{key}" in message and value in message, message


def test_a_management_cluster_of_ones_own_is_refused_in_process_mode() -> None:
    config = sim_config()
    config["management"] = {"mode": "existing", "kubeconfigSecret": "mgmtKubeconfig"}
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    assert "gpulab:management.mode" in str(raised.value) and "runtime: docker" in str(raised.value)


# --- the program's graph -------------------------------------------------------------------------------------


def test_process_mode_creates_processes_and_no_container_kind_or_command(built_tools: Path) -> None:
    program = run_program(sim_config())
    types = {r.type for r in program.registrations.values()}
    assert not [t for t in types if t.startswith(("docker:", "command:"))], sorted(types)
    dynamic = [r for r in program.registrations.values() if r.type == DYNAMIC]
    per_kind: dict[str, list[str]] = {}
    for resource in dynamic:
        per_kind.setdefault(resource.name.rsplit("-", 1)[-1], []).append(resource.name)
    assert {kind: len(names) for kind, names in per_kind.items()} == {
        "processes": 2,
        "nodes": 2,
        "hami": 2,
        "inventory": 2,
    }, per_kind
    for resource in dynamic:
        assert resource.inputs["bin_dir"] == str(built_tools)
        assert resource.inputs["folder"].endswith(("/tenant-a", "/tenant-b"))


def test_each_tenant_builds_in_order_processes_nodes_hami_inventory(built_tools: Path) -> None:
    """Explicit dependencies: nodes after the API answers, HAMi after the nodes, each inventory after HAMi."""
    program = run_program(sim_config())
    by_name = {r.name: r for r in program.registrations.values() if r.type == DYNAMIC}
    for tenant in ("tenant-a", "tenant-b"):
        chain = [
            next(r for n, r in by_name.items() if tenant in n and n.endswith(part))
            for part in ("processes", "nodes", "hami", "inventory")
        ]
        for before, after in itertools.pairwise(chain):
            assert program.depends_on(after, before), f"{after.name} does not wait for {before.name}"


def test_kubeconfigs_stay_secret_and_there_is_no_management_kubeconfig(built_tools: Path) -> None:
    program = run_program(sim_config())
    assert "management_kubeconfig" not in program.exports
    assert {"tenant_a_kubeconfig", "tenant_b_kubeconfig"} <= program.secret_exports
    control_planes = [r for r in program.registrations.values() if r.name.endswith("-processes")]
    assert all("kubeconfig" in r.additional_secret_outputs for r in control_planes)


FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key")


def file_references(kubeconfig: str) -> list[str]:
    """The fields of a kubeconfig that name files (client-go reads them from disk)."""
    document = yaml.safe_load(kubeconfig)
    entries = [entry.get("cluster") or {} for entry in document.get("clusters") or []]
    entries += [entry.get("user") or {} for entry in document.get("users") or []]
    return [key for entry in entries for key in FILE_FIELDS if key in entry]


# kwokctl create cluster --runtime binary, as it writes the kubeconfig (seen with kwok v0.8.0's kwokctl from
# `make tools`): the certificate files under its cluster folder, named by absolute path.
FAKE_KWOKCTL = """#!/usr/bin/env bash
set -euo pipefail
while [ $# -gt 0 ]; do
  case $1 in --name) name=$2; shift ;; --kubeconfig) kubeconfig=$2; shift ;; esac
  shift
done
pki="$KWOK_WORKDIR/clusters/$name/pki"
mkdir -p "$pki"
for file in ca.crt admin.crt admin.key; do echo "$file of $name" >"$pki/$file"; done
cat >"$kubeconfig" <<YAML
apiVersion: v1
clusters:
- cluster:
    certificate-authority: $pki/ca.crt
    server: https://127.0.0.1:51271
  name: kwok-$name
contexts:
- context:
    cluster: kwok-$name
    user: kwok-$name
  name: kwok-$name
current-context: kwok-$name
kind: Config
users:
- name: kwok-$name
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
YAML
"""


@pytest.mark.integration
def test_the_kubeconfig_output_carries_its_certificates(tmp_path: Path, monkeypatch) -> None:
    """Boundary: kwokctl's kubeconfig names its certificate files (under .state); the control plane's output is
    the tenant_<name>_kubeconfig users save, and must work without them: from another folder or machine, and after
    `make down` removed them. (No component runs behind this kwokctl: the wait for the controller manager,
    which tests/real/test_control_plane.py runs against the real one, is only recorded here.)"""
    from components.process.control_plane import ControlPlaneProvider
    from process_lab.control_plane import ControlPlane
    from process_lab.stack import TenantProcesses

    waited: list[str] = []
    monkeypatch.setattr(ControlPlane, "wait_controllers", lambda plane, timeout: waited.append(plane.name))

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in PROGRAMS:
        (bin_dir / program).write_text(FAKE_KWOKCTL if program == "kwokctl" else "#!/bin/sh\nexit 1\n")
        (bin_dir / program).chmod(0o755)
    processes = TenantProcesses("gpulab-tenant-a", bin_dir, tmp_path / "process" / "sim" / "tenant-a")
    outs = ControlPlaneProvider().create({**processes.props(), "running": True, "without_hami": True}).outs
    kubeconfig = outs["kubeconfig"]
    assert file_references(kubeconfig) == [], kubeconfig
    document = yaml.safe_load(kubeconfig)
    pki = processes.folder / "kwok" / "clusters" / "gpulab-tenant-a" / "pki"
    carried = {
        "ca.crt": document["clusters"][0]["cluster"]["certificate-authority-data"],
        "admin.crt": document["users"][0]["user"]["client-certificate-data"],
        "admin.key": document["users"][0]["user"]["client-key-data"],
    }
    for name, data in carried.items():
        assert base64.b64decode(data) == (pki / name).read_bytes(), name
    assert document["clusters"][0]["cluster"]["server"] == outs["endpoint"] == "https://127.0.0.1:51271"
    assert document["current-context"] == "kwok-gpulab-tenant-a"
    assert waited == ["gpulab-tenant-a"], "created, then waited for its controller manager"


def test_the_tenant_kubeconfig_outputs_are_self_contained_secrets(built_tools: Path) -> None:
    program = run_program(sim_config())
    for key in ("tenant_a_kubeconfig", "tenant_b_kubeconfig"):
        assert key in program.secret_exports
        assert file_references(program.exports[key]) == []
        assert yaml.safe_load(program.exports[key])["users"][0]["user"]["client-key-data"]


def test_pulumi_up_without_the_programs_names_make_tools(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GPULAB_BIN", str(tmp_path))
    monkeypatch.delenv("GPULAB_HAMI_SCHEDULER", raising=False)
    with pytest.raises(Exception, match=r"runtime: process needs kube-apiserver.*make tools"):
        run_program(sim_config())


def test_make_plan_needs_no_program_and_says_in_one_line_what_make_up_will(tmp_path: Path, monkeypatch) -> None:
    """`make plan STACK=sim` starts nothing, so it plans without HAMi's binary (or any program)
    and names what `make up` will need, instead of calling the stack invalid."""
    from preview.__main__ import plan

    monkeypatch.setenv("GPULAB_BIN", str(tmp_path))
    monkeypatch.delenv("GPULAB_HAMI_SCHEDULER", raising=False)
    code, lines = plan("sim")
    assert code == 0, lines
    needed = [line for line in lines if line.startswith("make up STACK=sim will need ")]
    assert needed == [
        "make up STACK=sim will need kube-apiserver, kube-controller-manager, kube-scheduler, kwok, etcd, kwokctl, "
        "kubectl, hami-scheduler (HAMi v2.10.0): `make tools` builds all but hami-scheduler, which "
        "GPULAB_HAMI_SCHEDULER_<RELEASE> names (docs/process-lab.md)"
    ]
    assert lines[-1] == "verdict: ready for `make up`"
    # What process mode has, not the Docker lab's kind network and MetalLB pool.
    assert not [line for line in lines if line.startswith("kind network") or "MetalLB pool" in line], lines
    assert "management cluster: none in process mode (each tenant's control plane runs as local processes)" in lines
    # The pack's Kamaji, MetalLB and worker-container policies judge nothing here, and the plan says so.
    nothing = [line.split(" (")[0].strip() for line in lines if ": nothing to judge (no " in line]
    assert nothing == [
        "worker-version-matches-control-plane",
        "tenant-version-supported-by-kamaji",
        "metallb-pool-ipv4",
    ]
    endpoint = "(127.0.0.1:<port>: the tenant API server's port, chosen free at pulumi up)"
    assert [line.split()[0] for line in lines if line.endswith(endpoint)] == ["tenant_a_endpoint", "tenant_b_endpoint"]
    assert "GPULAB_PLAN" not in os.environ, "the plan's setting outlived it: `pulumi up` would skip the check"


# --- the plumbing ------------------------------------------------------------------------------------------


def test_free_ports_are_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_two_control_planes_created_at_once_share_no_port() -> None:
    """kwokctl's own choice gave both tenants 32761-32766; gpulab names every port of the binary runtime."""
    first, second = (yaml.safe_load(kwokctl_configuration())["options"] for _ in range(2))
    assert first["bindAddress"] == "127.0.0.1"
    ports = [first[o] for o in PORT_OPTIONS] + [second[o] for o in PORT_OPTIONS]
    assert len(set(ports)) == 2 * len(PORT_OPTIONS) and all(isinstance(p, int) for p in ports)


def test_every_cluster_runs_without_request_limits() -> None:
    """kwokctl's option, as its loader reads it; tests/real/test_control_plane.py shows the flags it becomes."""
    assert yaml.safe_load(kwokctl_configuration())["options"]["disableQPSLimits"] is True


@pytest.mark.parametrize("address", [None, "10.89.0.1"])
def test_every_clusters_kwok_controller_leaves_a_pod_hami_has_not_allocated_pending(address: str | None) -> None:
    """kwokctl's configuration as its loader reads it (one componentsPatches entry a component): the loopback
    lab and the joinable one both pass kwok-controller the selector; tests/real/test_bind_time_watch.py shows
    the real kwok-controller leaving such a pod Pending."""
    document = yaml.safe_load(kwokctl_configuration() + cluster_configuration(Path("/pki"), address))
    patches = document["componentsPatches"]
    names = [patch["name"] for patch in patches]
    assert len(names) == len(set(names)), names
    kwok = {arg["key"]: arg["value"] for arg in next(p for p in patches if p["name"] == "kwok-controller")["extraArgs"]}
    assert kwok["disregard-status-with-annotation-selector"] == "hami.io/bind-phase=allocating"
    if address is not None:
        assert document["options"]["kubeApiserverCertSANs"] == [address]
        assert kwok["manage-nodes-with-annotation-selector"] == "kwok.x-k8s.io/node=fake"
    # One instance each, no lease to lose (tests/real/test_process_restart.py starves the API server).
    for component in ("kube-controller-manager", "kube-scheduler"):
        args = {arg["key"]: arg for arg in next(p for p in patches if p["name"] == component)["extraArgs"]}
        assert args["leader-elect"]["value"] == "false" and args["leader-elect"]["override"] is False


@pytest.mark.parametrize(
    ("address", "policy_status", "expected"),
    [
        (None, False, "*,-validatingadmissionpolicy-status-controller"),
        ("10.89.0.1", False, "*,bootstrapsigner,tokencleaner,-validatingadmissionpolicy-status-controller"),
        (None, True, "*"),
        ("10.89.0.1", True, "*,bootstrapsigner,tokencleaner"),
    ],
)
def test_the_controller_manager_runs_every_default_controller_but_the_policy_status_one_unless_asked(
    address: str | None, policy_status: bool, expected: str
) -> None:
    """One --controllers, as kwokctl's loader reads it: the lab's tenants leave out the policy status controller
    (control_plane.POLICY_STATUS_CONTROLLER), the judge cluster of tests/real keeps it (tests/real/cluster.py), and
    a joinable cluster adds kubeadm's bootstrap signer and token cleaner. tests/real shows both kinds at work."""
    document = yaml.safe_load(kwokctl_configuration() + cluster_configuration(Path("/pki"), address, policy_status))
    manager = next(p for p in document["componentsPatches"] if p["name"] == "kube-controller-manager")
    given = [arg for arg in manager["extraArgs"] if arg["key"] == "controllers"]
    assert [arg["value"] for arg in given] == [expected]
    assert given[0]["override"] is False, "kwokctl v0.8.0 passes no --controllers of its own"


def _ignores_term(marker: Path) -> list[str]:
    return ["bash", "-c", f"trap '' TERM; while :; do sleep 0.1; done # {marker}"]


@pytest.mark.integration
def test_a_detached_program_outlives_its_starter_and_stops_even_when_it_ignores_term(tmp_path: Path) -> None:
    """The engine kills the provider's process group: a detached program is in a session of its own."""
    starter = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, os; from pathlib import Path; from process_lab.commands import start_detached;"
            f"print(start_detached({_ignores_term(tmp_path)!r}, env=os.environ, log=Path({str(tmp_path / 'log')!r})))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        start_new_session=True,
    )
    pid = int(starter.stdout)
    try:
        assert os.getsid(pid) == pid, "in a session of its own"
        assert is_ours(pid, str(tmp_path))
        stop_session(pid, str(tmp_path), timeout=1)
        assert not is_ours(pid, str(tmp_path))
    finally:
        if is_ours(pid, str(tmp_path)):
            os.killpg(pid, 9)


@pytest.mark.integration
def test_a_pid_that_is_no_longer_ours_is_never_signalled(tmp_path: Path) -> None:
    """After a reboot or a long time, the pid in state may belong to another program: its command line decides."""
    other = start_detached(["sleep", "30"], env=os.environ, log=tmp_path / "log")
    try:
        stop_session(other, str(tmp_path / "lab-folder"), timeout=1)
        assert Path(f"/proc/{other}").exists() and not is_ours(other, str(tmp_path / "lab-folder"))
    finally:
        os.killpg(other, 9)
        os.waitpid(other, 0)


# --- make up / make down STACK=sim ---------------------------------------------------------------------------


def make_runtime(directory: Path, stack: str) -> str:
    """The runtime the Makefile reads for STACK from DIRECTORY's Pulumi.STACK.yaml (its own sed line)."""
    show = ["--eval", "gpulab-runtime: ; @echo $(RUNTIME)", "gpulab-runtime"]
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), *show, f"STACK={stack}"],
        cwd=directory,
        env={**os.environ, "MAKEFLAGS": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout.strip()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  gpulab:runtime: process", "process"),
        ("  'gpulab:runtime': \"process\"  # local processes", "process"),
        ("  \"gpulab:runtime\": 'process'", "process"),
        ("  gpulab:runtime: docker", "docker"),
        ("  gpulab:runtimes: process", "docker"),
        ("# gpulab:runtime: process", "docker"),
    ],
)
def test_make_reads_the_runtime_from_the_stack_file(tmp_path: Path, line: str, expected: str) -> None:
    """Boundary: the YAML a user writes, as make reads it before ./venv exists; no stack file is the Docker lab."""
    (tmp_path / "Pulumi.x.yaml").write_text(f"config:\n{line}\n  gpulab:tenants: []\n")
    assert make_runtime(tmp_path, "x") == expected
    assert make_runtime(tmp_path, "none") == "docker"


@pytest.mark.integration
def test_make_and_the_loader_agree_on_every_stack_files_runtime() -> None:
    """make chooses the steps (preflight, downloads) by its own reading of the one key; gpulab's loader then runs
    the stack on its own: the two must never disagree on a stack the project ships."""
    from model.config import load_stack_file

    # The stack files git tracks: other tests write short-lived Pulumi.test-*.yaml files beside them, some invalid
    # on purpose.
    tracked = subprocess.run(
        ["git", "ls-files", "--", "Pulumi.*.yaml"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    stacks = [ROOT / name for name in tracked]
    assert len(stacks) >= 5, tracked
    runtimes = {path.name: make_runtime(ROOT, path.name[len("Pulumi.") : -len(".yaml")]) for path in stacks}
    assert runtimes == {path.name: load_stack_file(path).runtime for path in stacks}
    assert set(runtimes.values()) == {"docker", "process"}


@pytest.mark.integration
def test_make_up_and_down_in_process_mode_ask_for_the_built_programs_not_docker_or_downloads() -> None:
    env = {**os.environ, "MAKEFLAGS": "", "PULUMI_BACKEND_URL": "file:///nonexistent"}
    for target in ("up", "destroy"):
        plan = subprocess.run(
            ["make", "-n", target, "STACK=sim"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        ).stdout
        assert "process_lab.preflight" in plan, plan
        assert "preflight.sh" not in plan and "prereqs.sh" not in plan, plan
    docker = subprocess.run(["make", "-n", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "hack/preflight.sh" in docker.stdout


def test_the_preflight_names_make_tools_once_and_hami_separately(tmp_path: Path, monkeypatch) -> None:
    from process_lab.preflight import ENGINE, problems

    monkeypatch.delenv("GPULAB_HAMI_SCHEDULER", raising=False)
    found = problems(tmp_path)
    assert len(found) == 2 and "make tools" in found[0] and "GPULAB_HAMI_SCHEDULER" in found[1], found
    for name in (*PROGRAMS, *ENGINE, f"hami-scheduler-{DEFAULT_VERSION}"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert problems(tmp_path) == []


def test_make_down_does_not_need_hami(tmp_path: Path, monkeypatch) -> None:
    """Destroy starts no HAMi: a lab whose GPULAB_HAMI_SCHEDULER was set in another shell still comes down
    (seen here: `make down STACK=sim` stopped at the preflight, every process left running)."""
    from process_lab.preflight import ENGINE, main, problems

    monkeypatch.delenv("GPULAB_HAMI_SCHEDULER", raising=False)
    monkeypatch.setenv("GPULAB_BIN", str(tmp_path))
    for name in (*PROGRAMS, *ENGINE):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert problems(tmp_path, destroy=True) == [] and len(problems(tmp_path)) == 1
    assert main(["--destroy"]) == 0 and main([]) == 1 and main(["--bogus"]) == 2


@pytest.mark.integration
def test_a_sweep_stops_every_process_of_a_tenant_folder_and_nothing_of_another(tmp_path: Path) -> None:
    """After `pulumi up` was killed halfway (a HAMi started, never recorded) or processes were killed by
    hand, delete and re-create find what to stop by folder; tenant-a's sweep spares tenant-ab."""
    from process_lab.commands import pids_of, stop_all

    mine, other = tmp_path / "tenant-a", tmp_path / "tenant-ab"
    started = [
        start_detached(_ignores_term(mine / "tls" / "tls.crt"), env=os.environ, log=tmp_path / "1.log"),
        start_detached(["bash", "-c", f"sleep 30; : {mine}/kwok/x"], env=os.environ, log=tmp_path / "2.log"),
        start_detached(["bash", "-c", f"sleep 30; : {other}/kwok/x"], env=os.environ, log=tmp_path / "3.log"),
    ]
    try:
        # A shell's child is briefly a copy of it, command line included, until it execs: a superset then.
        assert set(started[:2]) <= set(pids_of(f"{mine}/"))
        stop_all(f"{mine}/", timeout=1)
        assert pids_of(f"{mine}/") == [] and started[2] in pids_of(f"{other}/")
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, 9)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


@pytest.mark.integration
def test_no_shipped_stack_file_carries_an_encryption_salt() -> None:
    """Boundary: the Pulumi CLI checks a stack file's `encryptionsalt` against the user's passphrase: a salt made
    with another passphrase stops the first `make up` with `incorrect passphrase` (seen with Pulumi.sim.yaml).
    Read as committed: `pulumi stack select --create` salts the user's copy, which is theirs."""
    listed = subprocess.run(["git", "ls-files", "Pulumi.*.yaml"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode:
        pytest.skip("not a git checkout: the shipped stack files cannot be told from the user's")
    for name in listed.stdout.split():
        shipped = subprocess.run(["git", "show", f"HEAD:{name}"], cwd=ROOT, capture_output=True, text=True).stdout
        assert "encryptionsalt" not in yaml.safe_load(shipped), name


def test_make_ups_validation_names_no_cli_to_download_in_process_mode() -> None:
    """`preview --validate` prints the CLIs `make up` downloads; process mode's come from `make tools`."""
    from preview.__main__ import main as preview_main

    for stack, expected in (("sim", ""), ("dev", "kind kubectl pulumi")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert preview_main(["--stack", stack, "--project-dir", str(LAB_PROJECT), "--validate"]) == 0
        assert out.getvalue().strip() == expected, stack


# --- two tenants' creates side by side never remove each other's folders ---


def test_a_create_leaves_the_stack_folder_another_tenant_is_making_its_own_in(tmp_path: Path) -> None:
    """Boundary: the file system as two tenants' providers share it (Pulumi creates tenants in parallel). The
    create of tenant-a clears what an interrupted run left of tenant-a only: the stack's folder, just made
    and still empty by tenant-b's create, stays."""

    from process_lab.stack import TenantProcesses
    from process_lab.tenant_control_plane import tear_down

    stack = tmp_path / "process" / "sim"
    stack.mkdir(parents=True)  # tenant-b's create: mkdir(parents=True) made it, its own folder not yet
    props = {"name": "gpulab-tenant-a", "bin_dir": str(tmp_path / "bin"), "folder": str(stack / "tenant-a")}
    tear_down(TenantProcesses.from_props(props), parents=False)
    assert stack.is_dir()


def test_a_tenant_folder_is_made_even_when_a_destroy_removes_its_parent_in_between(tmp_path, monkeypatch) -> None:
    """The interleaving seen in 3 of 8 runs, made to happen: the stack's folder is made, another tenant's destroy
    removes it (empty), then our folder inside it is made: FileNotFoundError before; made again now."""
    import pathlib

    from process_lab.tenant_control_plane import make_folder

    stack = tmp_path / "process" / "sim"
    real_mkdir = os.mkdir
    removed = []

    def mkdir(path, mode=0o777, *args, **kwargs):
        real_mkdir(path, mode, *args, **kwargs)
        if Path(path) == stack and not removed:
            removed.append(path)
            os.rmdir(path)  # the other tenant's destroy, finding the stack's folder empty

    monkeypatch.setattr(pathlib.os, "mkdir", mkdir)
    make_folder(stack / "tenant-a")
    assert removed and (stack / "tenant-a").is_dir()
    assert (stack / "tenant-a").stat().st_mode & 0o777 == 0o700


def test_creates_and_destroys_of_two_tenants_side_by_side_never_fail(tmp_path: Path) -> None:
    """Two tenants' create steps (clear, make the folder) and destroys (clear, parents too) in two threads."""
    import threading

    from process_lab.stack import TenantProcesses
    from process_lab.tenant_control_plane import make_folder, tear_down

    stack = tmp_path / "process" / "sim"
    failures: list[BaseException] = []

    def tenant(name: str) -> None:
        props = {"name": f"gpulab-{name}", "bin_dir": str(tmp_path / "bin"), "folder": str(stack / name)}
        try:
            for _ in range(40):
                tear_down(TenantProcesses.from_props(props), parents=False)
                make_folder(Path(props["folder"]))
                (Path(props["folder"]) / "kubeconfig").write_text("made")
                tear_down(TenantProcesses.from_props(props))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=tenant, args=(name,)) for name in ("tenant-a", "tenant-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    assert not (tmp_path / "process").exists(), "a destroy of both leaves the stack's folders"


# Process mode's stacks made before the runtime was chosen once in __main__.py have these two components, which
# held nothing in process mode (no kind cluster, no image to pull); the runtime split no longer makes them. Every
# other resource stays.
REMOVED_IN_PROCESS_MODE = {"gpulab:index:ManagementCluster::management", "gpulab:index:ImageCache::images"}


def test_a_process_stack_made_before_the_runtime_split_keeps_every_resource(monkeypatch) -> None:
    """The URNs, parents and dependencies of tests/snapshots/process-registrations.json, stored by the
    code before the split (commit 'store the process-mode stack's registrations'), read through the aliases
    the engine follows: nothing replaced or rewired, nothing new, and only the two empty components gone."""
    from registration_snapshot import as_before

    monkeypatch.setenv("GPULAB_PLAN", "1")  # the mocks start nothing: no check of ./bin
    stored = json.loads((ROOT / "tests" / "snapshots" / "process-registrations.json").read_text())["process"]
    program = run_program(sim_config())
    now, new = as_before(program.registrations, set(stored))
    gone = {urn.split("$")[-1] for urn in set(stored) - set(now)}
    assert gone == REMOVED_IN_PROCESS_MODE
    assert not [urn for urn in now if now[urn] != stored[urn]]
    assert new == []


def test_a_control_plane_recorded_before_the_runtime_split_is_no_change(tmp_path: Path) -> None:
    """Older states call the control plane's cluster `name`; the program now says `cluster`.
    The provider's diff reads both as one record (process_lab.stack.TenantProcesses): no update, no replace."""
    from components.process.control_plane import ControlPlaneProvider

    common = {"bin_dir": str(tmp_path / "bin"), "folder": str(tmp_path / "tenant-a"), "running": True}
    before = {"name": "gpulab-tenant-a", **common, "kubeconfig": "k", "endpoint": "https://127.0.0.1:1"}
    diff = ControlPlaneProvider().diff("id", before, {"cluster": "gpulab-tenant-a", **common})
    assert (diff.changes, diff.replaces) == (False, [])
    renamed = ControlPlaneProvider().diff("id", before, {"cluster": "gpulab-tenant-b", **common})
    assert renamed.replaces == ["cluster"]


def test_process_mode_asks_for_the_kubernetes_provider_make_tools_built(built_tools: Path) -> None:
    """The engine warns at every provider start when the plugin found is not the version asked for (the SDK asks
    for its own release, requirements.txt); process mode asks for the one tools/programs.toml builds."""
    import tomllib

    from lab_harness import ROOT as PROJECT

    release = tomllib.loads((PROJECT / "tools" / "programs.toml").read_text())["pulumi-kubernetes"]["release"]
    program = run_program(sim_config())
    providers = [r for r in program.registrations.values() if r.type == "pulumi:providers:kubernetes"]
    assert len(providers) == 2, [r.name for r in providers]
    assert {r.inputs.get("version") for r in providers} == {release.removeprefix("v")}


def test_the_engine_takes_process_modes_provider_from_the_project_not_from_path() -> None:
    """Boundary: the Pulumi CLI v3.274.0's plugin lookup (sdk/go/common/workspace/plugins.go
    getPluginInfoAndPath): a project plugin of the requested name and release wins before $PATH, which warns
    at every provider start; a request for another release skips it. Pulumi.yaml must name the release
    tools/programs.toml builds, in a folder a fresh clone has (the CLI refuses a project whose plugin folder is
    missing: resource/plugin/host.go resolvePluginPath), linking to ./bin's provider. The real engine's side
    is tests/real/test_engine.py."""
    from components.process.control_plane import built_provider_version

    plugins = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["plugins"]["providers"]
    assert [(p["name"], p["version"]) for p in plugins] == [("kubernetes", built_provider_version())]
    link = ROOT / plugins[0]["path"] / "pulumi-resource-kubernetes"
    assert link.is_symlink() and not Path(os.readlink(link)).is_absolute()
    assert link.resolve() == (ROOT / "bin" / "pulumi-resource-kubernetes").resolve()


def test_the_control_planes_programs_get_the_labs_gc_target_unless_the_user_set_one(monkeypatch) -> None:
    from process_lab.control_plane import GO_GC, ControlPlane

    plane = ControlPlane("gpulab-tenant-a", Path("/bin"), Path("/tmp/w"))
    monkeypatch.delenv("GOGC", raising=False)
    assert plane.env["GOGC"] == GO_GC == "25"
    monkeypatch.setenv("GOGC", "off")
    assert plane.env["GOGC"] == "off"
