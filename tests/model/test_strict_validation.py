"""Strict validation: whole-string ASCII patterns, references and hosts checked,
one machine per tenant, and upper bounds on everything that multiplies work."""

from __future__ import annotations

import copy
import re

import pytest
from lab_harness import lab_config, make_tenant, with_pushed_plugin

from model.config import ConfigError, parse_config


def reference() -> dict:
    return copy.deepcopy(lab_config())


def error_for(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    return str(raised.value)


def ssh(config: dict, index: int, workers: list[dict]) -> dict:
    config["tenants"][index].update(workerMode="ssh", workers=workers)
    return config


@pytest.mark.parametrize(
    "path, value, key",
    [
        (("tenants", 0, "name"), "tenant-a\n", "gpulab:tenants[0].name"),
        (("scheduling", "nodeLockTimeout"), "2s\n", "gpulab:scheduling.nodeLockTimeout"),
        (("tenants", 0, "kubernetesVersion"), "v١.٣٦.٤", "gpulab:tenants[0].kubernetesVersion"),
        (("tenants", 0, "kubernetesVersion"), "v1.36.4\n", "gpulab:tenants[0].kubernetesVersion"),
        (("tenants", 0, "namespaces"), ["gpu-workloads\n"], "gpulab:tenants[0].namespaces"),
        (("management", "network"), "my net", "gpulab:management.network"),
        (("management", "network"), "gpulab\n", "gpulab:management.network"),
        (("management", "name"), "gpulab\n", "gpulab:management.name"),
        (("tenants", 0, "workerImage"), "kindest/node:v1.36.4 --privileged", "gpulab:tenants[0].workerImage"),
        (("versions", "workloadImage"), "Busybox:latest", "gpulab:versions"),
        (("versions", "mockDevicePluginImage"), "projecthami/mock-device-plugin:1.0.1\n", "gpulab:versions"),
    ],
)
def test_patterns_match_whole_ascii_strings(path, value, key) -> None:
    config = reference()
    target = config
    for part in path[:-1]:
        target = target.setdefault(part, {}) if isinstance(part, str) else target[part]
    target[path[-1]] = value
    message = error_for(config)
    assert key in message, message


@pytest.mark.parametrize(
    "worker, key",
    [
        ({"host": "gpu box"}, "workers[0].host"),
        ({"host": "gpu-box\n"}, "workers[0].host"),
        ({"host": "gpu-bóx"}, "workers[0].host"),
        ({"host": "-oProxyCommand=x"}, "workers[0].host"),
        ({"host": "10.0.0.5", "user": "root; reboot"}, "workers[0].user"),
        ({"host": "10.0.0.5", "user": "-oProxyCommand=x"}, "workers[0].user"),
        ({"host": "10.0.0.5", "user": "ubuntu\n"}, "workers[0].user"),
    ],
)
def test_ssh_host_and_user_are_validated(worker, key) -> None:
    message = error_for(ssh(reference(), 0, [worker]))
    assert f"gpulab:tenants[0].{key}" in message, message


def test_valid_ssh_hosts_pass() -> None:
    parse_config(ssh(reference(), 0, [{"host": "gpu-box-1.lan"}, {"host": "10.0.0.5"}, {"host": "fd00::5"}]))
    parse_config(ssh(reference(), 0, [{"host": "gpu-box-2", "user": "first.last"}, {"host": "gpu-3", "user": "Ops_1"}]))


def test_a_machine_joins_one_tenant_once() -> None:
    twice = ssh(reference(), 0, [{"host": "10.0.0.5"}, {"host": "10.0.0.5", "name": "other"}])
    assert "10.0.0.5:22 listed more than once" in error_for(twice)
    across = ssh(ssh(reference(), 0, [{"host": "gpu-1"}]), 1, [{"host": "GPU-1"}])
    message = error_for(across)
    assert "gpulab:tenants[1].workers[0].host" in message and "already a worker of tenant tenant-a" in message
    other_port = ssh(ssh(reference(), 0, [{"host": "gpu-1"}]), 1, [{"host": "gpu-1", "port": 2222}])
    parse_config(other_port)  # two machines behind one address (port forwarding) are two machines


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda c: c["tenants"][0]["gpus"][0].update(count=100_000_000), "gpus[0].count"),
        (lambda c: c["tenants"][0].update(gpus=[{"model": "L4", "count": 40}, {"model": "T4", "count": 40}]), "gpus"),
        (lambda c: c["tenants"][0].update(splitCount=1_000_000), "splitCount"),
        (
            lambda c: c["tenants"][0]["workloads"].append({"name": "w", "kind": "Deployment", "replicas": 10**8}),
            "replicas",
        ),
    ],
)
def test_upper_bounds(change, key) -> None:
    config = reference()
    change(config)
    message = error_for(config)
    assert (key in message and "less than or equal" in message) or "at most" in message, message


def test_number_of_tenants_is_bounded() -> None:
    config = reference()
    config["tenants"] = [make_tenant(f"t{i}", i) for i in range(101)]
    assert "gpulab:tenants" in error_for(config)


PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBGVWxSq3lHnY9Hh5Wq7fHJx0aX5V4Kf4Yw3kT4m1e8pQAAAJg0u6Z9NLum\n-----END OPENSSH PRIVATE KEY-----\n"
)
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://10.0.0.1:6443', "
    "certificate-authority-data: "
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFW}}]\n"
    "users: [{name: x, user: {client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVBN3V}}]\n"
)


@pytest.mark.parametrize(
    "place",
    [
        lambda c, v: c["management"].update(name=v),
        lambda c, v: c.update(management=v),
        lambda c, v: c["tenants"][0].update(name=v),
        lambda c, v: c["tenants"][0].update(workerImage=v),
        lambda c, v: c.update(scheduling={"nodeLockTimeout": v}),
    ],
)
@pytest.mark.parametrize("secret", [PRIVATE_KEY, KUBECONFIG], ids=["private-key", "kubeconfig"])
def test_errors_never_echo_secret_looking_values(place, secret) -> None:
    config = reference()
    place(config, secret)
    message = error_for(config)
    for line in secret.splitlines():
        for fragment in (line[10:50], line[-30:]):
            if len(fragment) > 20:
                assert fragment not in message, message
    assert "b3BlbnNzaC1rZXkt" not in message and "LS0tLS1CRUdJTi" not in message


def test_long_values_are_truncated() -> None:
    config = reference()
    config["tenants"][0]["name"] = "a b " * 1250
    message = error_for(config)
    assert "a b " * 30 not in message and "(5002 characters)" in message, message


# --- identity, strictness matching the README, bounds. Own fixtures: make_tenant only. ---


def two_tenants(**keys) -> dict:
    return {"tenants": [make_tenant("tenant-a", 0), make_tenant("tenant-b", 1)], **keys}


def with_ssh(config: dict, index: int, workers: list[dict]) -> dict:
    config["tenants"][index].update(workerMode="ssh", workers=workers)
    with_pushed_plugin(config)  # gpulab's plugin, v2.10.0's default, from an image SSH machines can pull
    return config


@pytest.mark.parametrize(
    "first, second",
    [
        ("10.0.0.21", "::ffff:10.0.0.21"),
        ("fd00::5", "fd00:0:0:0:0:0:0:5"),
        ("fd00::5", "FD00::0005"),
        ("gpu-1.lan", "GPU-1.LAN"),
    ],
)
def test_one_machine_is_one_machine_whatever_its_spelling(first, second) -> None:
    within = with_ssh(two_tenants(), 0, [{"host": first}, {"host": second, "name": "other"}])
    assert "listed more than once" in error_for(within)
    across = with_ssh(with_ssh(two_tenants(), 0, [{"host": first}]), 1, [{"host": second}])
    message = error_for(across)
    assert "gpulab:tenants[1].workers[0].host" in message and "already a worker of tenant tenant-a" in message


def test_distinct_machines_stay_distinct() -> None:
    parse_config(with_ssh(two_tenants(), 0, [{"host": "10.0.0.21"}, {"host": "::ffff:10.0.0.22", "name": "b"}]))
    parse_config(with_ssh(with_ssh(two_tenants(), 0, [{"host": "fd00::5"}]), 1, [{"host": "fd00::6"}]))


def at_path(config: dict, path: tuple, value) -> dict:
    target = config
    for part in path[:-1]:
        target = target.setdefault(part, {}) if isinstance(part, str) else target[part]
    target[path[-1]] = value
    return config


STRICT_CASES = [
    # hosts: zone ids with injection or non-ASCII, numbers glibc reads as addresses, non-machines
    (("tenants", 0, "workers"), [{"host": "fe80::1%eth0\nProxyCommand x"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "fe80::1%$(reboot)"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "fe80::1%é"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "167772181"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "10"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "010.0.0.21"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "10.0.0.0x15"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "0.0.0.0"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "::"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "224.0.0.1"}], "tenants[0].workers[0].host"),
    (("tenants", 0, "workers"), [{"host": "ff02::1"}], "tenants[0].workers[0].host"),
    # Docker's predefined networks
    (("management", "network"), "host", "management.network"),
    (("management", "network"), "none", "management.network"),
    (("management", "network"), "bridge", "management.network"),
    (("management", "name"), "bridge", "management.name"),
    # system namespaces as gpulab-owned workload namespaces
    (("tenants", 0, "namespaces"), ["default"], "tenants[0].namespaces[0]"),
    (("tenants", 0, "namespaces"), ["gpu", "kube-system"], "tenants[0].namespaces[1]"),
    (("tenants", 0, "namespaces"), ["kube-gpu"], "tenants[0].namespaces[0]"),
    # CIDRs
    (("tenants", 0, "podCidr"), "10.244.0.0/255.255.0.0", "tenants[0].podCidr"),
    (("tenants", 0, "podCidr"), "10.244.0.0/25", "tenants[0].podCidr"),
    (("tenants", 0, "podCidr"), "127.0.0.0/8", "tenants[0].podCidr"),
    (("tenants", 0, "podCidr"), "224.0.0.0/4", "tenants[0].podCidr"),
    (("tenants", 0, "podCidr"), "0.0.0.0/8", "tenants[0].podCidr"),
    (("tenants", 0, "serviceCidr"), "10.96.0.0/29", "tenants[0].serviceCidr"),
    (("tenants", 0, "serviceCidr"), "169.254.0.0/16", "tenants[0].serviceCidr"),
    # image repositories in upper case, versions with leading zeros
    (("tenants", 0, "workerImage"), "Kindest/node:v1.36.4", "tenants[0].workerImage"),
    (("tenants", 0, "kubernetesVersion"), "v1.036.4", "tenants[0].kubernetesVersion"),
    (("tenants", 0, "kubernetesVersion"), "v01.36.4", "tenants[0].kubernetesVersion"),
    # every versions.* string against its own grammar
    (("versions", "kamajiImageTag"), '26.8.2-edge"\n  pullPolicy: Always', "versions.kamajiImageTag"),
    (("versions", "kamajiImageTag"), "26.8.2-edge\nextra: yaml", "versions.kamajiImageTag"),
    (("versions", "kamajiMaxKubernetes"), "v1.036", "versions.kamajiMaxKubernetes"),
    (("versions", "calicoManifest"), "http://example.test/calico.yaml", "versions.calicoManifest"),
    (("versions", "metallbManifest"), "https://example.test/a b.yaml", "versions.metallbManifest"),
    (
        ("versions", "hami"),
        {"repo": "http://charts.example.test", "chart": "hami", "version": "2.8.3"},
        "versions.hami.repo",
    ),
    (
        ("versions", "hami"),
        {"repo": "https://c.example.test", "chart": "hami", "version": "2.8.3; x"},
        "versions.hami.version",
    ),
    (
        ("versions", "certManager"),
        {"repo": "https://c.example.test", "chart": "Cert", "version": "v1"},
        "versions.certManager.chart",
    ),
    (("versions", "workerNodeImages"), {"latest": "kindest/node:v1.36.4"}, "versions"),
    # the host tools: make up installs them before any stack is read, so a stack may not set them
    (("versions", "kind"), {"version": "v0.30.0"}, "versions"),
    (("versions", "kubectl"), {"version": "v1.35.0"}, "versions"),
    (("versions", "pulumi"), {"version": "3.200.0"}, "versions"),
]


@pytest.mark.parametrize(
    "path, value, key", STRICT_CASES, ids=[f"{'.'.join(map(str, c[0]))}={c[1]!r}"[:60] for c in STRICT_CASES]
)
def test_refused_with_a_message_naming_the_key(path, value, key) -> None:
    config = two_tenants()
    if path[-1] == "workers":
        config["tenants"][0]["workerMode"] = "ssh"
    message = error_for(at_path(config, path, value))
    assert f"gpulab:{key}" in message, message


@pytest.mark.parametrize(
    "addresses, index, fragment",
    [
        (["192.168.10.250-192.168.10.240"], 0, "descends"),
        (["192.168.10.240-"], 0, "neither a CIDR nor a first-last range"),
        (["10.0.0.0/8-10.0.0.5"], 0, "neither a CIDR nor a first-last range"),
        (["0.0.0.0/0"], 0, "every IPv4 address"),
        (["192.168.10.1/24"], 0, "host bits zero"),
        (["fd00::1-fd00::9"], 0, "not IPv4"),
        (["192.168.10.240/28", "10.100.0.10-10.100.0.20"], 1, "overlaps tenants[0].podCidr 10.100.0.0/16"),
        (["10.201.3.0/24"], 0, "overlaps tenants[1].serviceCidr 10.201.0.0/16"),
    ],
)
def test_metallb_addresses(addresses, index, fragment) -> None:
    config = with_ssh(with_ssh(two_tenants(), 0, [{"host": "10.0.0.5"}]), 1, [{"host": "10.0.0.6"}])
    config["management"] = {"mode": "existing", "install": {"metallb": True}, "metallbAddresses": addresses}
    message = error_for(config)
    assert f"gpulab:management.metallbAddresses[{index}] = " in message and fragment in message, message


def test_well_formed_metallb_addresses_pass() -> None:
    config = with_ssh(two_tenants(), 0, [{"host": "10.0.0.5"}])
    config = with_ssh(config, 1, [{"host": "10.0.0.6"}])
    config["management"] = {
        "mode": "existing",
        "install": {"metallb": True},
        "metallbAddresses": ["192.168.10.240-192.168.10.250", "192.168.11.0/28", "192.168.12.7/32"],
    }
    parse_config(config)


@pytest.mark.parametrize(
    "text, key",
    [
        ("          count: yes\n", "gpus[0].count"),  # YAML 1.1 boolean: the Pulumi CLI passes the string "yes"
        ("          count: on\n", "gpus[0].count"),
        ("          count: true\n", "gpus[0].count"),  # a boolean where a number belongs
    ],
)
def test_yaml_the_pulumi_cli_reads_differently_is_refused(tmp_path, text, key) -> None:
    from model.config import load_stack_file

    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  gpulab:tenants:\n    - name: t\n      gpus:\n        - model: L4\n" + text)
    with pytest.raises(ConfigError) as raised:
        load_stack_file(path)
    assert f"gpulab:tenants[0].{key} = " in str(raised.value) and "missing" not in str(raised.value), raised.value


def test_stack_files_are_read_as_the_pulumi_cli_reads_them(tmp_path) -> None:
    from model.config import load_stack_file

    path = tmp_path / "Pulumi.dev.yaml"
    # No namespace: the CLI puts the key in the project's (loaders.go stackConfigNamespacedWithProject).
    # `010` is octal 8 for yaml.v3, as for PyYAML; `0o2` is 2 for yaml.v3 (a string for PyYAML).
    path.write_text(
        "config:\n  tenants:\n    - name: t\n      splitCount: 010\n      gpus: [{model: L4, count: 0o2}]\n"
    )
    tenant = load_stack_file(path).tenants[0]
    assert tenant.split_count == 8 and tenant.gpus[0].count == 2
    path.write_text(path.read_text() + "  gpulab:tenants: []\n")
    with pytest.raises(ConfigError, match="set twice"):
        load_stack_file(path)


@pytest.mark.integration
def test_shell_exports_are_safe_to_evaluate(tmp_path) -> None:
    """hack/prereqs.sh evaluates these lines: the pins match their grammar, and even a value that got past it
    is quoted (bash runs the lines as prereqs.sh does)."""
    import subprocess

    from model.versions import CliTool, Versions, shell_exports

    lines = shell_exports(Versions()).splitlines()
    assert all(re.fullmatch(r"[A-Z0-9_]+=[A-Za-z0-9.]*", line) for line in lines), lines
    marker = tmp_path / "injected"
    hostile = Versions.model_construct(
        **{**dict(Versions()), "kind": CliTool.model_construct(version=f"v1$(touch {marker})", sha256_linux_amd64="")}
    )
    script = 'eval "$(cat)"; printf %s "$KIND_VERSION"'
    result = subprocess.run(["bash", "-c", script], input=shell_exports(hostile), capture_output=True, text=True)
    assert result.stdout == f"v1$(touch {marker})" and not marker.exists()


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda t: t.update(limits={"gpumem": 10**15 + 1}), "limits.gpumem"),
        (lambda t: t.update(limits={"gpus": 2**63}), "limits.gpus"),
        (lambda t: t.update(quota={"gpumem": 10**18}), "quota.gpumem"),
        (lambda t: t.update(quota={"gpucores": 2**64}), "quota.gpucores"),
        (lambda t: t.update(workloads=[{"name": "w", "gpus": 2}]), "workloads[0].gpus"),  # 1 card on the node
        (lambda t: t.update(workloads=[{"name": f"w{i}"} for i in range(1001)]), "workloads"),
        (lambda t: t.update(namespaces=[f"n{i}" for i in range(101)]), "namespaces"),
        (
            lambda t: t.update(
                workerMode="ssh", workers=[{"host": f"10.0.{i // 250}.{i % 250 + 1}"} for i in range(501)]
            ),
            "workers",
        ),
    ],
)
def test_bounds(change, key) -> None:
    config = two_tenants()
    change(config["tenants"][0])
    message = error_for(config)
    assert f"gpulab:tenants[0].{key}" in message, message


def test_limits_at_the_bound_pass_and_stay_exact_for_cel_and_the_engine() -> None:
    from google.protobuf import struct_pb2

    from model.config import MAX_POD_LIMIT

    config = two_tenants()
    config["tenants"][0].update(limits={"gpumem": MAX_POD_LIMIT}, quota={"gpumem": MAX_POD_LIMIT})
    config["tenants"][0]["gpus"] = [{"model": "L4", "count": 2}]
    config["tenants"][0]["workloads"] = [{"name": "w", "gpus": 2}]  # as many cards as the node has: fine
    lab = parse_config(config)
    # The engine hands the pack a double: the bound survives the Struct round trip exactly.
    struct = struct_pb2.Struct()
    struct.update({"gpumem": lab.tenants[0].limits.gpumem})
    assert int(struct["gpumem"]) == MAX_POD_LIMIT
    # A CEL sum of 8,000 limits stays inside int64.
    assert 8000 * MAX_POD_LIMIT < 2**63
