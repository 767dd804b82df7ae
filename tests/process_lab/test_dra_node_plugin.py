"""process_lab/dra_plugin.py: gpulab's DRA kubelet plugin started on a real node, found serving, stopped.

Boundary: the node container (docker exec of systemctl, test and sh, as the node image's systemd answers) and the
tenant's API server (kubectl get/delete of resourceslices by field selector, as kube-apiserver v1.36.4 answers it,
quantities written back canonically: 20000 as "20k"). A double of both, built from
what the real lab showed (`make up STACK=nodes-dra`: a slice a former plugin left is still listed for 30 s; the
plugin publishes its slice a moment after its unit starts); the real run is make verify's TC-12 and TC-17.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from model import dra
from model.catalog import Card
from process_lab import dra_plugin, node_containers
from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane
from process_lab.dra_plugin import NodePlugin
from process_lab.stack import TenantProcesses

CARD = Card("GPU-MOCK-tenant-b-0", 0, "NVIDIA-A100-SXM4-80GB", 81920)


class Lab:
    """The node container and the tenant's API server, as the plugin's start, read and delete meet them."""

    def __init__(self, tmp_path: Path) -> None:
        self.running, self.program, self.api_up = True, True, True
        self.unit, self.enabled = "inactive", False
        self.files: dict[str, str] = {}
        self.slices: list[dict] = []
        self.publish_after = 2  # polls after the unit starts before the plugin's slice appears
        self.publishes = True
        self.calls: list[tuple[str, ...]] = []
        processes = TenantProcesses("gpulab-tenant-b", tmp_path / "bin", tmp_path / "tenant-b")
        (processes.folder / "kwok").mkdir(parents=True)
        processes.control_plane.kubeconfig.write_text("apiVersion: v1\n")  # the tenant's (never read here)
        self.plugin = NodePlugin(processes, "tenant-b-worker", dra.node_devices("tenant-b", "tenant-b-worker", [CARD]))

    def slice_of_plugin(self, memory: str = "81920") -> dict:
        devices = json.loads(json.dumps(self.plugin.devices["devices"]))
        devices[0]["capacity"]["memory"]["value"] = memory
        return {"metadata": {"uid": f"uid-{len(self.calls)}"}, "spec": {"driver": dra.DRIVER, "devices": devices}}

    def docker(self, *args: str, what: str, stdin: str | None = None, check: bool = True, timeout: float = 60):
        assert args[:3] == ("exec", "-i", "tenant-b-worker"), args
        argv = args[3:]
        self.calls.append(argv)
        code, out = 0, ""
        if argv[:2] == ("test", "-x"):
            code = 0 if self.program else 1
        elif argv[0] == "sh":
            self.files[dra_plugin.DEVICES_FILE] = stdin or ""
        elif argv[:2] == ("systemctl", "enable"):
            self.unit, self.enabled, self.polls = "active", True, 0
        elif argv[:2] == ("systemctl", "stop"):
            self.unit = "inactive"
        elif argv[:2] == ("systemctl", "disable"):
            self.unit, self.enabled = "inactive", False
        elif argv[:2] == ("systemctl", "is-active"):
            out, code = self.unit, 0 if self.unit == "active" else 3
        elif argv[0] == "journalctl":
            out = "gpulab-dra-plugin: publishing the node's devices: forbidden"
        elif argv[:2] == ("rm", "-f"):
            self.files.pop(argv[2], None)
        if check and code != 0:
            raise ProcessLabError(f"{what} failed (exit {code})")
        return subprocess.CompletedProcess(args, code, out, "")

    def kubectl(self, _plane: ControlPlane, *args: str, check: bool = True, timeout: float = 30, stdin=None):
        self.calls.append(("kubectl", *args))
        if not self.api_up:
            raise ProcessLabError("kubectl get on gpulab-tenant-b: no answer within 10 s (kubectl)")
        assert f"spec.nodeName=tenant-b-worker,spec.driver={dra.DRIVER}" in args, args
        if args[0] == "delete":
            self.slices = []
            return subprocess.CompletedProcess(args, 0, "", "")
        if self.unit == "active" and self.publishes and not self.slices:
            self.polls += 1
            if self.polls > self.publish_after:
                self.slices = [self.slice_of_plugin()]
        return subprocess.CompletedProcess(args, 0, json.dumps({"items": self.slices}), "")


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    found = Lab(tmp_path)
    monkeypatch.setattr(node_containers, "docker", found.docker)  # node_exec and the unit helpers call it
    monkeypatch.setattr(dra_plugin, "running", lambda node: found.running)
    monkeypatch.setattr(ControlPlane, "kubectl", lambda plane, *a, **k: found.kubectl(plane, *a, **k))
    monkeypatch.setattr(dra_plugin.time, "sleep", lambda _s: None)
    return found


def test_start_writes_the_devices_removes_a_former_slice_and_waits_for_the_plugins_own(lab: Lab) -> None:
    lab.slices = [lab.slice_of_plugin()]  # a former plugin's: same devices, still listed
    dra_plugin.start(lab.plugin, timeout=60)
    assert json.loads(lab.files[dra_plugin.DEVICES_FILE]) == lab.plugin.devices
    order = [c[:2] for c in lab.calls if c[0] in ("systemctl", "kubectl") and c[1] != "get"]
    assert order.index(("kubectl", "delete")) < order.index(("systemctl", "enable")), order
    assert lab.enabled and lab.slices and lab.polls == lab.publish_after + 1  # waited for the new slice
    assert dra_plugin.serving(lab.plugin) is True


def test_a_slice_with_other_capacities_is_not_the_plugins(lab: Lab) -> None:
    dra_plugin.start(lab.plugin, timeout=60)
    lab.slices = [lab.slice_of_plugin(memory="40k")]
    assert dra_plugin.serving(lab.plugin) is False
    lab.slices = [lab.slice_of_plugin(memory="81920")]
    assert dra_plugin.serving(lab.plugin) is True
    lab.api_up = False
    assert dra_plugin.serving(lab.plugin) is None, "an API server down now keeps the resource as it was"
    lab.api_up, lab.unit = True, "failed"
    assert dra_plugin.serving(lab.plugin) is False


def test_a_plugin_that_publishes_nothing_is_named_with_its_units_state_and_last_lines(lab: Lab) -> None:
    lab.publishes = False
    with pytest.raises(ProcessLabError) as raised:
        dra_plugin.start(lab.plugin, timeout=0)
    said = str(raised.value)
    assert "did not hold gpu-0 (81920 MB, 100 %)" in said and "(found: none)" in said, said
    assert "gpulab-dra-plugin.service is active; its last lines:" in said and "forbidden" in said, said


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"running": False}, "the node container tenant-b-worker is not running"),
        ({"program": False}, "`make tools` builds it and `make node-image` puts it"),
    ],
)
def test_a_node_that_cannot_run_the_plugin_is_named_and_nothing_is_started(lab: Lab, change: dict, says) -> None:
    for key, value in change.items():
        setattr(lab, key, value)
    with pytest.raises(ProcessLabError) as raised:
        dra_plugin.start(lab.plugin)
    assert says in str(raised.value), raised.value
    assert not lab.enabled and dra_plugin.DEVICES_FILE not in lab.files


def test_stop_disables_the_unit_removes_its_devices_and_slices_and_takes_a_gone_node(lab: Lab) -> None:
    dra_plugin.start(lab.plugin, timeout=60)
    dra_plugin.stop(lab.plugin)
    assert not lab.enabled and lab.unit == "inactive" and not lab.files and not lab.slices
    lab.running = False  # the node container removed by hand: nothing to exec, the slices still deleted
    lab.slices, lab.calls = [lab.slice_of_plugin()], []
    dra_plugin.stop(lab.plugin)
    assert lab.calls == [("kubectl", "delete", "resourceslices", "--field-selector",
                          f"spec.nodeName=tenant-b-worker,spec.driver={dra.DRIVER}", "--ignore-not-found")]  # fmt: skip
    assert not lab.slices


def test_preflight_names_a_node_image_without_the_plugin_or_with_another_one(tmp_path: Path, monkeypatch) -> None:
    """Boundary: `docker image inspect -f '{{json .Config.Labels}}'` as Docker answers it (a JSON object of the image's
    labels; null for none). make node-image labels the plugin's sha256 (node-image/build.sh)."""
    from boundary.bounded_run import BoundedResult
    from process_lab import preflight

    plugin = tmp_path / "gpulab-dra-plugin"
    plugin.write_bytes(b"the plugin make tools built")
    digest = "sha256:" + hashlib.sha256(plugin.read_bytes()).hexdigest()
    labels: dict[str, object] = {}

    def docker(argv, _timeout, **_):
        answer = json.dumps(labels.get("value")).encode() if argv[:3] == ["docker", "image", "inspect"] else b""
        return BoundedResult(list(argv), 0, answer, b"", False, 30.0, 0.1)

    monkeypatch.setattr(preflight, "run_bounded", docker)
    image = ("gpulab/node:v1.36.4",)
    said = preflight.docker_problems(image, False, image, tmp_path)
    assert len(said) == 1 and "carries no gpulab-dra-plugin label" in said[0] and "make tools node-image" in said[0]
    labels["value"] = {preflight.DRA_PLUGIN_LABEL: "sha256:" + "0" * 64}
    said = preflight.docker_problems(image, False, image, tmp_path)
    assert len(said) == 1 and "holds another gpulab-dra-plugin" in said[0] and "`make node-image`" in said[0]
    labels["value"] = {preflight.DRA_PLUGIN_LABEL: digest}
    assert preflight.docker_problems(image, False, image, tmp_path) == []
    assert preflight.docker_problems(image, False, (), tmp_path) == [], "a HAMi tenant's node does not need it"
