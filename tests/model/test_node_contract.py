"""The node contract (model/node_contract.py), held offline against both node images' definitions.

kindest/node cannot be pulled here, so it is held to the contract by what kind's own image definition says:
each contract item has a line of a kind file that gives it (KIND_EVIDENCE: path, the text). With a git mirror of
kubernetes-sigs/kind (GPULAB_KIND_GIT_DIR, e.g. the stored snapshot's), every quoted text is checked in that
file at KIND_COMMIT; without one those cases skip in one line and the rest checks that every item has evidence.
gpulab's node image is held to it by its files (node-image/, node-image/build.sh); tests/real/test_node_image.py
runs the built image.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from model import node_contract as contract
from model.versions import Versions

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "node-image" / "files"
# The newest commit of the stored kind snapshot (main, 2026-08-21, version 0.33.0-alpha): the pinned v0.33.0's
# tag is not in it. images/base is the same as at tag v0.32.0 but for two versions in its Dockerfile.
KIND_COMMIT = "fed268827e21ca48a74c38215c316dd343364ef5"
BASE = "images/base"
DROPIN = f"{BASE}/files/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"

# contract item -> [(kind file, a text it holds)]: where kindest/node gets what gpulab uses of it.
KIND_EVIDENCE: dict[str, list[tuple[str, str]]] = {
    "pid1": [(f"{BASE}/Dockerfile", "ln -s /usr/lib/systemd/systemd /sbin/init"), (f"{BASE}/Dockerfile", "systemd \\")],
    "containerd_socket": [(f"{BASE}/files/etc/crictl.yaml", f"unix://{contract.CONTAINERD_SOCKET}")],
    "programs": [
        ("pkg/build/nodeimage/internal/kube/builder_docker.go", 'filepath.Join(binDir, "kubeadm")'),
        ("pkg/build/nodeimage/buildcontext.go", 'nodePath := "/usr/bin/" + path.Base(binary)'),
        (f"{BASE}/Dockerfile", "COPY --from=build-containerd /containerd/bin/ctr /usr/local/bin/"),
        (f"{BASE}/Dockerfile", "conntrack iptables nftables iproute2 ethtool util-linux mount kmod"),
        (f"{BASE}/Dockerfile", "bash ca-certificates curl jq procps"),
    ],
    "kubelet_unit": [
        (f"{BASE}/files/etc/systemd/system/kubelet.service", "ExecStart=/usr/bin/kubelet"),
        (f"{BASE}/Dockerfile", "systemctl enable kubelet.service"),
    ],
    "kubeadm_dropin": [(DROPIN, flag) for flag in contract.KUBEADM_DROPIN_FLAGS]
    + [(DROPIN, f"EnvironmentFile={path}") for path in contract.KUBEADM_DROPIN_ENVIRONMENT]
    + [(DROPIN, variable) for variable in contract.KUBEADM_DROPIN_VARIABLES],
    "cni_bin_dir": [(f"{BASE}/Dockerfile", f"mkdir -p {contract.CNI_BIN_DIR}")]
    + [(f"{BASE}/Dockerfile", f"/cni-plugins/bin/{plugin} {contract.CNI_BIN_DIR}/") for plugin in contract.CNI_PLUGINS],
    "cni_conf_dir": [("pkg/build/nodeimage/const_cni.go", f"path: {contract.CNI_CONF_DIR}")],
    "cgroup_driver": [(f"{BASE}/files/etc/containerd/config.toml", "SystemdCgroup = true")],
    "sandbox_image": [(f"{BASE}/files/etc/containerd/config.toml", 'sandbox_image = "registry.k8s.io/pause:3.10"')],
}
CONTRACT_ITEMS = {
    "pid1",
    "containerd_socket",
    "programs",
    "kubelet_unit",
    "kubeadm_dropin",
    "cni_bin_dir",
    "cni_conf_dir",
}


def test_every_contract_item_has_evidence_in_kinds_image_definition() -> None:
    assert set(KIND_EVIDENCE) >= CONTRACT_ITEMS
    assert all(KIND_EVIDENCE[item] for item in CONTRACT_ITEMS)


def test_kindest_node_facts_are_the_ones_kind_states() -> None:
    kind = contract.kindest_node()
    assert kind.cgroup_driver == "systemd"  # SystemdCgroup = true (evidence above)
    assert f'sandbox_image = "{kind.sandbox_image}"' in dict(KIND_EVIDENCE["sandbox_image"]).values()
    assert kind.reference == Versions().worker_node_images["v1.36.4"]
    assert kind.reference.startswith("kindest/node:v1.36.4@sha256:")


def kind_file(path: str) -> str:
    git_dir = os.environ.get("GPULAB_KIND_GIT_DIR", "")
    if not git_dir:
        pytest.skip("GPULAB_KIND_GIT_DIR (a git mirror of kubernetes-sigs/kind) is not set: quotes not re-read")
    shown = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{KIND_COMMIT}:{path}"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


@pytest.mark.integration  # git reads kind's mirror
@pytest.mark.parametrize("item", sorted(KIND_EVIDENCE))
def test_the_evidence_is_in_kinds_files(item: str) -> None:
    for path, text in KIND_EVIDENCE[item]:
        assert text in kind_file(path), f"{path} at {KIND_COMMIT[:9]} does not hold {text!r}"


# gpulab's node image, from its own files.


def unit_values(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_gpulab_kubelet_unit_and_kubeadm_dropin_keep_the_contract() -> None:
    node = contract.gpulab_node()
    unit = (FILES / "etc/systemd/system/kubelet.service").read_text()
    assert unit_values(unit, "ExecStart") == [node.kubelet_path]
    assert "multi-user.target" in unit_values(unit, "WantedBy")
    dropin_path = FILES / contract.KUBEADM_DROPIN.lstrip("/")
    dropin = dropin_path.read_text()
    environment = " ".join(unit_values(dropin, "Environment"))
    for flag in contract.KUBEADM_DROPIN_FLAGS:
        assert flag in environment
    for path in contract.KUBEADM_DROPIN_ENVIRONMENT:
        assert path in unit_values(dropin, "EnvironmentFile")
    # ExecStart= empties the unit's own before the drop-in's; every variable reaches the kubelet.
    exec_start = unit_values(dropin, "ExecStart")
    assert exec_start[0] == "" and exec_start[1].split()[0] == node.kubelet_path
    for variable in ("$KUBELET_KUBECONFIG_ARGS", "$KUBELET_CONFIG_ARGS", *contract.KUBEADM_DROPIN_VARIABLES):
        assert variable in exec_start[1]


def test_gpulab_containerd_config_states_the_images_facts() -> None:
    node = contract.gpulab_node()
    cri = tomllib.loads((FILES / "etc/containerd/config.toml").read_text())["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == node.sandbox_image
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc["SystemdCgroup"] is (node.cgroup_driver == "systemd")
    wrapper = FILES / runc["BinaryName"].lstrip("/")
    assert wrapper.is_file() and os.access(wrapper, os.X_OK)
    assert cri["cni"] == {"bin_dir": contract.CNI_BIN_DIR, "conf_dir": contract.CNI_CONF_DIR}


def test_gpulab_packages_and_script_give_the_rest() -> None:
    packages = set(re.sub(r"#.*", "", (ROOT / "node-image" / "packages").read_text()).split())
    # systemd-sysv: /sbin/init is systemd; kmod: modprobe; procps, coreutils (essential): the shell tools.
    assert {"systemd", "systemd-sysv", "containerd", "runc", "containernetworking-plugins", "kmod", "jq"} <= packages
    script = (ROOT / "node-image" / "build.sh").read_text()
    assert "systemctl enable kubelet.service gpulab-images.service containerd.service" in script
    assert 'ln -sfn /usr/lib/cni "$stage/opt/cni/bin"' in script and '"$stage/etc/cni/net.d"' in script
    assert 'ENTRYPOINT ["/sbin/init"]' in script and "ENV container=docker" in script
    assert "programs=(kubelet kubeadm kubectl gpulab-dra-plugin)" in script and '"$stage/usr/bin/$program"' in script
