"""Strict validation (issue 13, items 5-7): whole-string ASCII patterns, references and hosts checked,
one machine per tenant, and upper bounds on everything that multiplies work."""

from __future__ import annotations

import copy

import pytest
from lab_harness import lab_config, make_tenant

from components.config import ConfigError, parse_config


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
