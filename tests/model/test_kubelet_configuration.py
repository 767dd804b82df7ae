"""The kubelet configuration a tenant's worker gets: Kamaji's, with the TenantControlPlane's configurationJSONPatches.

Boundary: Kamaji 26.8.2-edge builds the KubeletConfiguration from the kubelet's defaults (internal/kubeadm/
uploadconfig.go; the document it patches, made by running that code: tests/fixtures/kamaji/kubelet-configuration/),
applies the patches with evanphx/json-patch v5 (RFC 6902: `add` creates or replaces a member, `replace` and
`remove` need it there), and the kubelet validates what it gets (k8s.io/kubernetes v1.36.4 pkg/kubelet/apis/config/
validation/validation.go, validation_linux.go). The same patches through the real Go code on a cgroup v1 host:
that folder's README.
"""

from __future__ import annotations

import copy
import json

import pytest
from shared_data import ROOT

from model.config.loading import load_stack_file
from model.docker_lab.kamaji import control_plane_spec

KAMAJI_KUBELET_CONFIGURATION = ROOT / "tests" / "fixtures" / "kamaji" / "kubelet-configuration.json"
TENANTS = load_stack_file(ROOT / "Pulumi.dev.yaml").tenants


class PatchError(ValueError):
    pass


def json_patch(document: dict, operations: list[dict]) -> dict:
    """RFC 6902 add, replace and remove on object members, as evanphx/json-patch v5 applies them (patch.go: `add`
    on a missing member creates it; `replace` on one answers "doc is missing key")."""
    result = copy.deepcopy(document)
    for operation in operations:
        *parents, key = [part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]]
        target = result
        for part in parents:
            if part not in target:
                raise PatchError(
                    f"{operation['op']} operation does not apply: doc is missing path: {operation['path']}"
                )
            target = target[part]
        if operation["op"] == "add":
            target[key] = copy.deepcopy(operation["value"])
        elif key not in target:
            raise PatchError(f"{operation['op']} operation does not apply: doc is missing key: {operation['path']}")
        elif operation["op"] == "replace":
            target[key] = copy.deepcopy(operation["value"])
        elif operation["op"] == "remove":
            del target[key]
        else:
            raise PatchError(f"not modelled here: {operation['op']}")
    return result


def kubelet_configuration(tenant) -> dict:
    """What the tenant's kubelets get: Kamaji's document (its cluster DNS: the TCP's dnsServiceIPs), patched."""
    spec = control_plane_spec(tenant)
    base = json.loads(KAMAJI_KUBELET_CONFIGURATION.read_text())
    base["clusterDNS"] = spec["networkProfile"]["dnsServiceIPs"]
    return json_patch(base, spec["kubernetes"]["kubelet"]["configurationJSONPatches"])


def kubelet_refuses(config: dict, cgroup_v1: bool) -> list[str]:
    """The kubelet's own checks of the values gpulab patches (validation.go ValidateKubeletConfiguration: the image GC
    thresholds; validation_linux.go validateKubeletOSConfiguration: failCgroupV1 on a cgroup v1 host)."""
    high, low = config["imageGCHighThresholdPercent"], config["imageGCLowThresholdPercent"]
    refused = [
        f"{name} {value} not in 0..100" for name, value in (("high", high), ("low", low)) if not 0 <= value <= 100
    ]
    if low >= high:
        refused.append(f"imageGCLowThresholdPercent {low} must be less than imageGCHighThresholdPercent {high}")
    if config.get("failCgroupV1") and cgroup_v1:
        refused.append("kubelet is configured to not run on a host using cgroup v1")
    return refused


def test_kamajis_own_configuration_is_the_kubelets_defaults() -> None:
    """The fixture is what the kubelet's defaults give (the values gpulab must change among them)."""
    base = json.loads(KAMAJI_KUBELET_CONFIGURATION.read_text())
    assert (base["imageGCHighThresholdPercent"], base["imageGCLowThresholdPercent"]) == (85, 80)
    assert base["failCgroupV1"] is True and base["failSwapOn"] is True
    assert "cgroupDriver" not in base and "evictionHard" not in base  # omitempty: `replace` would fail on them
    assert kubelet_refuses(base, cgroup_v1=True) == ["kubelet is configured to not run on a host using cgroup v1"]


@pytest.mark.parametrize("tenant", TENANTS, ids=[t.name for t in TENANTS])
def test_tenant_kubelets_keep_the_labs_images_and_start_on_either_cgroup_version(tenant) -> None:
    config = kubelet_configuration(tenant)
    # kind's KubeletConfiguration (pkg/cluster/internal/kubeadm/config.go): no image GC, no disk eviction.
    assert config["imageGCHighThresholdPercent"] == 100
    assert config["evictionHard"] == {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"}
    assert config["failCgroupV1"] is False
    assert (config["cgroupDriver"], config["failSwapOn"]) == ("systemd", False)
    for cgroup_v1 in (True, False):
        assert kubelet_refuses(config, cgroup_v1) == [], f"cgroup v{1 if cgroup_v1 else 2}"


def test_the_patch_model_fails_as_kamajis_json_patch_does() -> None:
    """`replace` on a member the defaults omit fails, and Kamaji then uploads no kubelet-config at all."""
    base = json.loads(KAMAJI_KUBELET_CONFIGURATION.read_text())
    with pytest.raises(PatchError, match="doc is missing key: /cgroupDriver"):
        json_patch(base, [{"op": "replace", "path": "/cgroupDriver", "value": "systemd"}])
    assert json_patch(base, [{"op": "add", "path": "/cgroupDriver", "value": "systemd"}])["cgroupDriver"] == "systemd"
