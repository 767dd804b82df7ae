"""Beyond one host: an existing management cluster, SSH workers and real GPUs, from the same config."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pulumi
import pytest
import yaml
from lab_harness import lab_config, run_program, shared_program, tenant_kubeconfig
from policy_harness import program_resources, run_stack_policy, stack_args
from shared_data import ROOT

from components.shell import remote_script
from model.config import ConfigError, check_secrets, parse_config
from model.gpu_expectation import main as expectation_main
from model.gpu_expectation import mismatches

MANAGEMENT_KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: [{name: existing}]\n"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
SECRETS = {"managementKubeconfig": MANAGEMENT_KUBECONFIG, "sshPrivateKey": SSH_KEY}
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def existing(install: dict | None = None, **extra) -> dict:
    management = {"mode": "existing", "name": "gpulab", **extra}
    if install is not None:
        management["install"] = install
    return management


def ssh_tenant(config: dict, index: int = 0, gpu_mode: str = "mock", workers: list | None = None) -> dict:
    config = copy.deepcopy(config)
    tenant = config["tenants"][index]
    tenant["workerMode"] = "ssh"
    tenant["gpuMode"] = gpu_mode
    tenant["workers"] = workers or [{"host": f"10.0.0.{21 + 10 * index}", "user": "ubuntu"}]
    return config


def types(program) -> set[str]:
    return {registration.type for registration in program.registrations.values()}


# Config validation per mode


def error_for(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


def test_unknown_modes_are_refused_with_the_choices() -> None:
    config = lab_config(management={"mode": "cloud"})
    message = error_for(config)
    assert "gpulab:management.mode = 'cloud'" in message and "must be one of: kind, existing" in message
    config = lab_config()
    config["tenants"][0]["workerMode"] = "vm"
    assert "gpulab:tenants[0].workerMode = 'vm'" in error_for(config)
    config["tenants"][0]["workerMode"] = "container"
    config["tenants"][0]["gpuMode"] = "emulated"
    assert "gpulab:tenants[0].gpuMode = 'emulated'" in error_for(config)


def test_existing_mode_needs_its_kubeconfig_as_a_secret() -> None:
    config = ssh_tenant(ssh_tenant(lab_config(management=existing())), index=1)
    with pytest.raises(pulumi.RunError, match=r"gpulab:managementKubeconfig: is not set; .*pulumi config set --secret"):
        run_program(config, secrets={"sshPrivateKey": SSH_KEY})
    with pytest.raises(pulumi.RunError, match=r"gpulab:managementKubeconfig: holds .* in plain text"):
        run_program(config, secrets={"sshPrivateKey": SSH_KEY}, plain={"managementKubeconfig": MANAGEMENT_KUBECONFIG})
    misspelled = re.escape("gpulab:managementKubeconfig: is not set (gpulab:managementKubeconfg is set: a misspelling")
    with pytest.raises(pulumi.RunError, match=misspelled):  # as the engine passes secrets to the program
        run_program(config, secrets={"sshPrivateKey": SSH_KEY, "managementKubeconfg": MANAGEMENT_KUBECONFIG})


def test_ssh_mode_needs_workers_hosts_and_a_key() -> None:
    config = ssh_tenant(lab_config())
    config["tenants"][0]["workers"] = []
    assert "gpulab:tenants[0].workers: workerMode ssh needs workers" in error_for(config)
    config["tenants"][0]["workers"] = [{"user": "ubuntu"}]
    assert "gpulab:tenants[0].workers[0].host: is required" in error_for(config)
    lab = parse_config(ssh_tenant(lab_config()))
    with pytest.raises(
        ConfigError,
        match=re.escape("gpulab:sshPrivateKey: is not set; it must hold the SSH private key for ubuntu@10.0.0.21"),
    ):
        check_secrets(lab, is_set=lambda key: False, is_secret=lambda key: False)


def test_mode_combinations_that_cannot_work_are_refused() -> None:
    config = lab_config()
    config["tenants"][0]["gpuMode"] = "real"
    assert "gpuMode real needs real GPUs, so workerMode ssh" in error_for(config)
    config = lab_config()
    config["tenants"][0]["workers"] = [{"host": "10.0.0.21"}]
    assert "gpulab:tenants[0].workers: are only for workerMode: ssh" in error_for(config)
    assert "install.metallb needs metallbAddresses" in error_for(lab_config(management=existing({"metallb": True})))
    assert "install and metallbAddresses are for mode: existing" in error_for(
        lab_config(management={"mode": "kind", "install": {"kamaji": True}})
    )
    bad = existing({"metallb": True}, metallbAddresses=["fd00::10-fd00::20"])
    assert "is not IPv4" in error_for(lab_config(management=bad))
    assert "container workers live on the kind management cluster's Docker network" in error_for(
        lab_config(management=existing())
    )
    two_gpu_nodes = ssh_tenant(lab_config(), workers=[{"host": "a", "gpuNode": True}, {"host": "b", "gpuNode": True}])
    assert "mark at most one worker gpuNode: true" in error_for(two_gpu_nodes)


# Under mocks, per mode combination


def test_existing_cluster_with_ssh_workers_and_real_gpus() -> None:
    config = ssh_tenant(lab_config(management=existing()), gpu_mode="real")
    config = ssh_tenant(config, index=1, gpu_mode="real", workers=[{"host": "10.0.0.31", "user": "root"}])
    program = run_program(config, secrets=SECRETS)
    present = types(program)
    assert "docker:index/container:Container" not in present and "docker:index/remoteImage:RemoteImage" not in present
    assert not [r for r in program.of_type("command:local:Command") if r.name == "management-kind"]
    assert not program.of_type("kubernetes:helm.sh/v3:Release") or all(
        r.name.endswith("-hami") for r in program.of_type("kubernetes:helm.sh/v3:Release")
    ), "nothing is installed into an existing management cluster unless asked"
    assert not [r for r in program.of_type("command:local:Command") if r.name.endswith("-inventory")], (
        "no capacity patch"
    )
    assert program.named("management-kamaji-ready").inputs["stdin"] == MANAGEMENT_KUBECONFIG
    assert program.exports["management_kubeconfig"] == MANAGEMENT_KUBECONFIG
    assert "management_kubeconfig" in program.secret_exports
    assert "kind_subnet" not in program.exports and "metallb_pool" not in program.exports
    for tenant in ("tenant-a", "tenant-b"):
        key = f"{tenant.replace('-', '_')}_kubeconfig"
        assert program.exports[key] == tenant_kubeconfig(tenant) and key in program.secret_exports

    join = program.named("tenant-a-worker-0-join")
    assert join.type == "command:remote:Command"
    assert join.inputs["connection"]["host"] == "10.0.0.21" and join.inputs["connection"]["user"] == "ubuntu"
    assert join.inputs["connection"]["privateKey"] == SSH_KEY and "connection" in join.secret_inputs
    assert join.inputs["create"].startswith("sudo -n env NODE_NAME=tenant-a-worker-0 ")
    assert "kubeadm reset --force" in join.inputs["delete"]
    assert "stdin" in join.secret_inputs
    # The JoinConfiguration (with its token) is never handed to another run's environment.
    for remote in program.of_type("command:remote:Command"):
        assert remote.inputs.get("addPreviousOutputInEnv") is False, remote.name
    root_join = program.named("tenant-b-worker-0-join")
    assert root_join.inputs["create"].startswith("env "), "no sudo for root"
    check = program.named("tenant-a-worker-0-check")
    assert program.depends_on(join, check)

    label = program.named("tenant-a-gpus-gpu-label")
    assert label.inputs["metadata"]["name"] == "tenant-a-worker-0" and label.inputs["metadata"]["labels"] == {
        "gpu": "on"
    }
    expectation = program.named("tenant-a-gpus-expectation")
    assert json.loads(expectation.inputs["environment"]["EXPECT_CARDS"]) == [
        {"type": "NVIDIA-A100-SXM4-80GB", "memoryMb": 81920}
    ]
    assert program.depends_on(program.named("tenant-a-gpus-ready"), expectation)
    values = program.named("tenant-a-gpus-hami").inputs["values"]
    assert "mockDevicePlugin" not in values, "no mock"
    extra = values["scheduler"]["extender"]["extraArgs"]
    assert not [arg for arg in extra if arg.startswith("--node-lock-timeout")], "no lock workaround: plugins release"
    assert "--kube-qps=400" in extra, "HAMi's client at the lab's rate for real GPUs too"
    violations = run_stack_policy("gpu-request-limits", stack_args(program_resources(program)))
    assert violations == [], "the policy pack uses the declared cards in real mode too"
    assert run_stack_policy("mock-gpu-node-not-labelled-gpu-on", stack_args(program_resources(program))) == []


def test_existing_cluster_installs_only_what_is_asked() -> None:
    management = existing(
        {"certManager": False, "metallb": True, "kamaji": True}, metallbAddresses=["192.168.10.240-192.168.10.250"]
    )
    config = ssh_tenant(ssh_tenant(lab_config(management=management)), index=1, workers=[{"host": "10.0.0.31"}])
    program = run_program(config, secrets=SECRETS)
    # An existing cluster that does not answer at destroy may still hold the objects: never drop them silently.
    assert program.named("management-provider").inputs.get("deleteUnreachable") in (None, False, "false")
    releases = {r.name for r in program.of_type("kubernetes:helm.sh/v3:Release")}
    assert "management-kamaji" in releases and "management-cert-manager" not in releases
    # No kind cluster goes with it: what gpulab installed into an existing cluster, it uninstalls.
    assert program.named("management-kamaji").deleted_with == ""
    assert program.named("management-metallb-pool").inputs["spec"]["addresses"] == ["192.168.10.240-192.168.10.250"]
    assert program.exports["metallb_pool"] == "192.168.10.240-192.168.10.250"
    ready = program.named("management-cert-manager-ready")
    assert program.depends_on(program.named("management-kamaji"), ready), "an existing cert-manager is checked too"
    for tcp in program.of_type(TCP):
        assert program.depends_on(tcp, program.named("management-metallb-l2"))


def test_kind_management_with_ssh_workers_and_mock_gpus() -> None:
    program = shared_program(ssh_tenant(lab_config()), secrets={"sshPrivateKey": SSH_KEY})
    assert program.named("management-kind").type == "command:local:Command"
    containers = [r.name for r in program.of_type("docker:index/container:Container")]
    assert containers == ["tenant-b-worker-node"], "tenant-a's worker is a real machine"
    inventory = program.named("tenant-a-gpus-inventory")
    assert inventory.inputs["environment"]["NODE_NAME"] == "tenant-a-worker-0"
    assert (
        "--node-lock-timeout=2s"
        in program.named("tenant-a-gpus-hami").inputs["values"]["scheduler"]["extender"]["extraArgs"]
    )


def test_several_ssh_workers_per_tenant() -> None:
    workers = [{"host": "10.0.0.21", "name": "cpu-1"}, {"host": "10.0.0.22", "name": "gpu-1", "gpuNode": True}]
    program = run_program(ssh_tenant(lab_config(), workers=workers), secrets={"sshPrivateKey": SSH_KEY})
    joins = [r for r in program.of_type("command:remote:Command") if r.name.endswith("-join")]
    assert sorted(r.name for r in joins) == ["tenant-a-worker-cpu-1-join", "tenant-a-worker-gpu-1-join"]
    calico = program.named("tenant-a-worker-calico")
    for join in joins:
        assert program.depends_on(calico, join), "one Calico, after every node has joined"
    assert program.named("tenant-a-worker-ready").inputs["environment"]["NODE_NAMES"] == "cpu-1 gpu-1"
    assert program.named("tenant-a-gpus-inventory").inputs["environment"]["NODE_NAME"] == "gpu-1"
    assert program.exports["tenant_a_node"] == "gpu-1"
    leave = program.named("tenant-a-worker-gpu-1-leave")
    assert leave.inputs.get("create") is None and leave.inputs["delete"] == "bash scripts/node-leave.sh"
    assert program.depends_on(leave, program.named("tenant-a-worker-gpu-1-join")), "removed before the reset"


# The remote prerequisite check and the expectation check on real-shaped inputs

FAKES = ROOT / "tests" / "fakes"


def fake_root(
    tmp_path: Path, *, swap: bool = False, forward: str = "1", bridge_nf: str | None = "1", module: bool = False
) -> Path:
    """A machine's / as the checks read it. The bridge netfilter hooks show as their sysctl, `bridge_nf` (None: no
    such file, br_netfilter neither built in nor loaded). By default br_netfilter is built into the kernel, as on
    the machines gpulab's lab ran on: the sysctl is there and 1, but no /sys/module/br_netfilter (a built-in has
    no module directory unless it has parameters) and /lib/modules is empty. `module`: loaded as a module."""
    root = tmp_path / "root"
    (root / "proc/sys/net/ipv4").mkdir(parents=True)
    (root / "proc/sys/net/ipv4/ip_forward").write_text(forward + "\n")
    swaps = "Filename\tType\tSize\tUsed\tPriority\n" + ("/swap.img\tfile\t2097148\t0\t-2\n" if swap else "")
    (root / "proc/swaps").write_text(swaps)
    if bridge_nf is not None:
        (root / "proc/sys/net/bridge").mkdir(parents=True)
        (root / "proc/sys/net/bridge/bridge-nf-call-iptables").write_text(bridge_nf + "\n")
    if module:
        (root / "sys/module/br_netfilter").mkdir(parents=True)
    (root / "run/containerd").mkdir(parents=True)
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "run/containerd/containerd.sock"))
    sock.close()
    return root


def run_remote(tmp_path: Path, script: str, env: dict[str, str], stdin: str = "", **extra_env: str):
    """Run the exact command line gpulab sends over SSH, here, with fakes on PATH."""
    command = remote_script(script, env, sudo=False)
    environment = {**os.environ, "PATH": f"{FAKES}:{os.environ['PATH']}", "FAKE_DIR": str(tmp_path), **extra_env}
    return subprocess.run(
        ["sh", "-c", command], input=stdin, capture_output=True, text=True, env=environment, timeout=60
    )


@pytest.mark.integration
@pytest.mark.parametrize("module", [False, True], ids=["br_netfilter built in", "br_netfilter a module"])
def test_remote_check_passes_on_a_prepared_machine(tmp_path: Path, module: bool) -> None:
    root = fake_root(tmp_path, swap=True, module=module)
    result = run_remote(
        tmp_path, "ssh-node-check.sh", {"KUBERNETES_VERSION": "v1.36.4", "NODE": "gpu-1"}, GPULAB_ROOT=str(root)
    )
    assert result.returncode == 0, result.stderr
    assert "gpu-1 is ready to join" in result.stderr and "swap is on" in result.stderr


@pytest.mark.integration
def test_remote_check_names_everything_missing(tmp_path: Path) -> None:
    root = fake_root(tmp_path, forward="0", bridge_nf=None)
    (root / "run/containerd/containerd.sock").unlink()
    result = run_remote(
        tmp_path,
        "ssh-node-check.sh",
        {"KUBERNETES_VERSION": "v1.36.4", "NODE": "gpu-1"},
        GPULAB_ROOT=str(root),
        FAKE_KUBEADM_VERSION="v1.35.2",
        FAKE_KUBELET_VERSION="v1.37.0",
    )
    assert result.returncode == 1
    for expected in (
        "gpu-1 cannot join tenant (Kubernetes v1.36.4) yet",
        "no container runtime socket",
        "kubeadm is v1.35.2, the tenant runs v1.36.4",
        "kubelet is v1.37.0, the tenant runs v1.36.4",
        "bridge netfilter is off (no net.bridge.bridge-nf-call-iptables): modprobe br_netfilter",
        "net.ipv4.ip_forward is off",
    ):
        assert expected in result.stderr, expected


@pytest.mark.integration
def test_remote_check_names_bridge_netfilter_turned_off(tmp_path: Path) -> None:
    root = fake_root(tmp_path, bridge_nf="0")
    result = run_remote(
        tmp_path, "ssh-node-check.sh", {"KUBERNETES_VERSION": "v1.36.4", "NODE": "gpu-1"}, GPULAB_ROOT=str(root)
    )
    assert result.returncode == 1
    assert "net.bridge.bridge-nf-call-iptables is 0: sysctl -w net.bridge.bridge-nf-call-iptables=1" in result.stderr


# The Docker host's check (host-prereqs.sh runs node-host-check.sh in a privileged container on the host network)


def host_root(tmp_path: Path, **shape) -> Path:
    """fake_root with the limits node-host-check.sh reads, each already high enough."""
    root = fake_root(tmp_path, **shape)
    for key, value in {
        "net/netfilter/nf_conntrack_max": 4194304,
        "fs/inotify/max_user_instances": 512,
        "fs/inotify/max_user_watches": 524288,
    }.items():
        (root / "proc/sys" / key).parent.mkdir(parents=True, exist_ok=True)
        (root / "proc/sys" / key).write_text(f"{value}\n")
    return root


def host_check(tmp_path: Path, root: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PATH": f"{FAKES}:{os.environ['PATH']}", "FAKE_DIR": str(tmp_path), **env}
    return subprocess.run(
        ["bash", "-s"],
        input=(ROOT / "scripts" / "node-host-check.sh").read_text(),  # as host-prereqs.sh feeds it to the container
        capture_output=True,
        text=True,
        env={**environment, "GPULAB_ROOT": str(root)},
        timeout=60,
    )


def modprobes(tmp_path: Path) -> list[str]:
    calls = tmp_path / "calls"
    return [line for line in calls.read_text().splitlines() if line.startswith("modprobe")] if calls.exists() else []


@pytest.mark.integration
@pytest.mark.parametrize("module", [False, True], ids=["br_netfilter built in", "br_netfilter a module"])
def test_host_check_takes_the_bridge_sysctl_as_the_sign_of_br_netfilter(tmp_path: Path, module: bool) -> None:
    """Boundary: a kernel with br_netfilter built in has net.bridge.bridge-nf-call-iptables (1) and neither
    /sys/module/br_netfilter nor a module for modprobe (kmod's FATAL: not found in /lib/modules)."""
    result = host_check(tmp_path, host_root(tmp_path, module=module))
    assert result.returncode == 0, result.stderr
    assert "host prerequisites ok" in result.stderr
    assert modprobes(tmp_path) == [], "nothing to load: the hooks are there"


@pytest.mark.integration
def test_host_check_loads_br_netfilter_only_without_its_sysctl(tmp_path: Path) -> None:
    root = host_root(tmp_path, bridge_nf=None)
    result = host_check(tmp_path, root, FAKE_MODPROBE_LOADS="1")
    assert result.returncode == 0, result.stderr
    assert modprobes(tmp_path) == ["modprobe br_netfilter"]


@pytest.mark.integration
def test_host_check_names_the_fix_when_br_netfilter_cannot_be_loaded(tmp_path: Path) -> None:
    result = host_check(tmp_path, host_root(tmp_path, bridge_nf=None))
    assert result.returncode == 1
    assert "bridge netfilter is off: no net.bridge.bridge-nf-call-iptables" in result.stderr
    assert "fix it on the Docker host with: sudo modprobe br_netfilter" in result.stderr


@pytest.mark.integration
def test_host_check_turns_bridge_netfilter_on(tmp_path: Path) -> None:
    root = host_root(tmp_path, bridge_nf="0")
    result = host_check(tmp_path, root)
    assert result.returncode == 0, result.stderr
    assert "raising net.bridge.bridge-nf-call-iptables from 0 to 1" in result.stderr
    assert (root / "proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"


@pytest.mark.integration
def test_remote_join_runs_kubeadm_on_the_machine_itself(tmp_path: Path) -> None:
    """The machine gets only a JoinConfiguration on stdin: no admin kubeconfig, no token creation there,
    the token never on a command line, the file removed afterwards."""
    from scripts.join_config import join_configuration

    config = yaml.safe_dump(
        join_configuration("10.0.0.5:6443", "abcdef", "0123456789abcdef", "sha256:5e1f", "gpu-1", ["Swap"])
    )
    env = {"NODE_NAME": "gpu-1", "TENANT": "tenant-a", "TIMEOUT": "5"}
    result = run_remote(
        tmp_path,
        "worker-join.sh",
        env,
        stdin=config,
        GPULAB_POLL_INTERVAL="0.05",
        KUBEADM_DIR=str(tmp_path / "etc-kubernetes"),
        GPULAB_NODE_TMPFS=str(tmp_path),
        TMPDIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    joined = (tmp_path / "joined-with").read_text().strip()
    assert joined == f"join --config {tmp_path}/gpulab-join.yaml", "the token is not on the command line"
    assert (tmp_path / "join-config").read_text() == config
    log = (tmp_path / "calls").read_text()
    assert "0123456789abcdef" not in log, "argv of every call"
    assert "token create" not in log and "token delete" not in log, "no admin rights on the machine"
    assert "abcdef.0123456789abcdef" not in result.stdout + result.stderr
    assert not (tmp_path / "gpulab-join.yaml").exists() and not (tmp_path / "gpulab-admin.conf").exists()
    assert not list(tmp_path.glob("gpulab-run.*")), "the run's private directory is removed"


def test_ssh_workers_get_join_material_not_the_admin_kubeconfig() -> None:
    config = ssh_tenant(lab_config())
    program = shared_program(config, secrets={"sshPrivateKey": SSH_KEY})
    material = program.named("tenant-a-worker-0-join-config")
    join = program.named("tenant-a-worker-0-join")
    delete = program.named("tenant-a-worker-0-join-token-delete")
    assert material.type == "command:local:Command" and material.inputs["create"] == "bash scripts/join-config.sh"
    assert material.inputs["stdin"] == tenant_kubeconfig("tenant-a"), "made on the Pulumi host"
    assert join.inputs.get("stdin") != tenant_kubeconfig("tenant-a"), "the machine never gets the admin kubeconfig"
    assert "stdin" in join.secret_inputs
    assert program.depends_on(join, material) and program.depends_on(delete, join)
    assert delete.inputs["create"] == "bash scripts/delete-token.sh"


def test_ssh_worker_resources_name_the_node_once() -> None:
    """Boundary: the names `make plan` and `pulumi up` show, and the URNs in a stack's state. A default-named
    worker's resources carry its node name once (`tenant-a-worker-0-check`), each with an alias to the name it
    had (`tenant-a-worker-tenant-a-worker-0-check`), so a deployed stack keeps them; a named worker's
    resources keep their names (tests/snapshots: unchanged)."""
    config = ssh_tenant(lab_config(), workers=[{"host": "10.0.0.21"}, {"host": "10.0.0.22", "name": "gpu-box"}])
    program = shared_program(config, secrets={"sshPrivateKey": SSH_KEY})
    names = sorted(r.name for r in program.registrations.values() if r.name.startswith("tenant-a-worker-"))
    assert "tenant-a-worker-0-check" in names and "tenant-a-worker-gpu-box-check" in names
    assert not [name for name in names if name.count("tenant-a") > 1], names
    for suffix in ("check", "join-config", "join", "join-token-delete", "leave"):
        renamed = program.named(f"tenant-a-worker-0-{suffix}")
        assert [alias.get("name") for alias in renamed.aliases] == [f"tenant-a-worker-tenant-a-worker-0-{suffix}"]
        assert not program.named(f"tenant-a-worker-gpu-box-{suffix}").aliases
    join = program.named("tenant-a-worker-0-join")
    assert "JOIN_CONFIG_RESOURCE=tenant-a-worker-0-join-config" in join.inputs["create"]


# As HAMi's plugin writes them (pkg/device/devices.go DeviceInfo: every field omitempty, so zero index left out).
L4_REGISTERED = [
    {"id": "GPU-8f1c", "count": 10, "devmem": 23034, "devcore": 100, "type": "NVIDIA-L4", "health": True},
    {"id": "GPU-77a2", "index": 1, "count": 10, "devmem": 23034, "devcore": 100, "type": "NVIDIA-L4", "health": True},
]
L4_DECLARED = [{"type": "NVIDIA-L4", "memoryMb": 24576}, {"type": "NVIDIA-L4", "memoryMb": 24576}]


def registered(devices: list[dict]) -> tuple:
    """The devices as model/gpu_expectation.py reads them from the annotation (hami/annotations.py)."""
    from hami.annotations import parse_register

    return parse_register(json.dumps(devices))


def expectation_cli(tmp_path: Path, annotation: str) -> int:
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"metadata": {"annotations": {"hami.io/node-nvidia-register": annotation}}}))
    return expectation_main(["--expect", json.dumps(L4_DECLARED), "--node", str(node)])


def test_expectation_matches_real_shaped_registration() -> None:
    assert mismatches(L4_DECLARED, registered(L4_REGISTERED)) == []


def test_expectation_reports_a_missing_card() -> None:
    (problem,) = mismatches(L4_DECLARED, registered(L4_REGISTERED[:1]))
    assert "declared 2 x NVIDIA-L4 (24576 MB), but the node registers 1 x NVIDIA-L4 (23034 MB)" in problem
    assert "not found: 1 x NVIDIA-L4 (24576 MB)" in problem


def test_expectation_reports_a_different_model_and_unhealthy_cards() -> None:
    t4 = [{**L4_REGISTERED[0], "type": "NVIDIA-Tesla-T4", "devmem": 15360, "health": False}, L4_REGISTERED[1]]
    problems = mismatches(L4_DECLARED, registered(t4))
    assert any("unhealthy devices: ['GPU-8f1c']" in p for p in problems)
    assert any("not declared: 1 x NVIDIA-Tesla-T4 (15360 MB)" in p for p in problems)


def test_expectation_cli_waits_while_nothing_is_registered(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"metadata": {"name": "gpu-1", "annotations": {}}}))
    assert expectation_main(["--expect", json.dumps(L4_DECLARED), "--node", str(node)]) == 3
    assert expectation_cli(tmp_path, json.dumps(L4_REGISTERED)) == 0


def test_expectation_reads_an_unhealthy_card_as_hami_writes_it(tmp_path: Path, capsys) -> None:
    """HAMi leaves `health` out when it is false (omitempty): the check once took such a card for a healthy one."""
    unhealthy = [{key: value for key, value in L4_REGISTERED[0].items() if key != "health"}, L4_REGISTERED[1]]
    assert expectation_cli(tmp_path, json.dumps(unhealthy)) == 1
    assert "HAMi reports unhealthy devices: ['GPU-8f1c']" in capsys.readouterr().err


def test_expectation_names_an_annotation_hami_cannot_read(tmp_path: Path, capsys) -> None:
    """Read as HAMi's decoder reads it: a memory as a string is no card HAMi knows (the check once took it for one),
    and text that is no JSON is said in a line, not a traceback."""
    assert expectation_cli(tmp_path, json.dumps([{**L4_REGISTERED[0], "devmem": "23034"}, L4_REGISTERED[1]])) == 1
    assert "HAMi cannot read the node's hami.io/node-nvidia-register" in capsys.readouterr().err
    assert expectation_cli(tmp_path, "[{") == 1
    assert "not JSON" in capsys.readouterr().err


@pytest.mark.integration
def test_a_retried_ssh_join_with_expired_material_says_what_to_do(tmp_path: Path) -> None:
    from scripts.join_config import EXPIRY_COMMENT, join_configuration

    stale = f"{EXPIRY_COMMENT}2020-01-01T00:00:00Z\n" + yaml.safe_dump(
        join_configuration("10.0.0.5:6443", "abcdef", "0123456789abcdef", "sha256:5e1f", "gpu-1", ["Swap"])
    )
    env = {
        "NODE_NAME": "gpu-1",
        "TENANT": "tenant-a",
        "TIMEOUT": "5",
        "JOIN_CONFIG_RESOURCE": "tenant-a-worker-gpu-1-join-config",
    }
    result = run_remote(
        tmp_path,
        "worker-join.sh",
        env,
        stdin=stale,
        KUBEADM_DIR=str(tmp_path / "k"),
        GPULAB_NODE_TMPFS=str(tmp_path),
        TMPDIR=str(tmp_path),
    )
    assert result.returncode == 1
    assert "expired at 2020-01-01T00:00:00Z" in result.stderr and "tenant-a-worker-gpu-1-join-config" in result.stderr
    assert not (tmp_path / "joined-with").exists() and not (tmp_path / "gpulab-join.yaml").exists()
