"""process_lab/hami_plugin.py: gpulab's HAMi device plugin started on a HAMi tenant's real node, found serving,
stopped; its RBAC against the plugin's own code; its unit in the node image; HAMi without the bind-time role.

Boundary: the node container (docker exec of systemctl, test, cat and sh, as the node image's systemd answers; its
kubelet.conf as kubeadm join writes it: the relay's address and the CA embedded, the client certificate a file),
the tenant's API server (kubectl apply, create token, get node -o json with quantities written back canonically,
annotate) and hami-scheduler's log ("Node device added", HAMi v2.10.0 pkg/scheduler/scheduler.go). A double of
each, built from what they answer; the real run is `make up STACK=nodes` and `make verify STACK=nodes`
(docs/real-nodes.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from model.catalog import Card, expand_cards
from process_lab import hami_plugin, node_containers
from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane
from process_lab.hami_plugin import NodePlugin
from process_lab.stack import TenantProcesses

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_SOURCE = ROOT / "tools" / "gpulab-hami-plugin"
UNIT_FILE = ROOT / "node-image" / "files" / "etc" / "systemd" / "system" / "gpulab-hami-plugin.service"
NODE = "tenant-a-worker"
CARD = Card("GPU-MOCK-tenant-a-0", 0, "NVIDIA-A100-SXM4-80GB", 81920)
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nthe cluster CA\n-----END CERTIFICATE-----\n").decode()
KUBELET_CONF = f"""apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {CA}
    server: https://172.18.0.1:40123
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    namespace: default
    user: default-auth
  name: default-context
current-context: default-context
kind: Config
preferences: {{}}
users:
- name: default-auth
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
"""
EXPIRES = 1_900_000_000


def jwt(claims: dict) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


TOKEN = jwt({"sub": f"system:serviceaccount:kube-system:{hami_plugin.SERVICE_ACCOUNT}", "exp": EXPIRES})


class Lab:
    """The node container, the tenant's API server and hami-scheduler's log, as the plugin's start, read and stop
    meet them: the plugin, once its unit runs, registers with the kubelet (the node's allocatable, canonical
    quantities) and writes the register annotation a few polls later, and HAMi then logs the node."""

    def __init__(self, tmp_path: Path, cards: list[Card]) -> None:
        self.running, self.program, self.api_up, self.registers = True, True, True, True
        self.unit, self.enabled = "inactive", False
        self.files: dict[str, str] = {"/etc/kubernetes/kubelet.conf": KUBELET_CONF}
        self.modes: dict[str, str] = {}
        self.allocatable: dict[str, str] = {"cpu": "2", "memory": "24Gi", "pods": "110"}
        self.annotations: dict[str, str] = {}
        self.applied: list[dict] = []
        self.register_after = 2  # polls after the unit starts
        self.restarts = 0  # systemd's NRestarts of the unit: kept across explicit starts (systemd 252)
        self.restarts_after_start = 0
        self.polls = 0
        self.calls: list[tuple[str, ...]] = []
        self.stdins: list[str] = []
        processes = TenantProcesses("gpulab-tenant-a", tmp_path / "bin", tmp_path / "tenant-a")
        (processes.folder / "kwok").mkdir(parents=True)
        processes.control_plane.kubeconfig.write_text("apiVersion: v1\n")  # the tenant's (never read here)
        self.log = processes.folder / "hami-scheduler.log"
        self.plugin = NodePlugin(processes, NODE, [card.__dict__ for card in cards], "v2.10.0")

    def register(self) -> None:
        """What the plugin does once the kubelet took it: the kubelet posts the resources, the plugin annotates."""
        wanted = self.plugin.wanted()
        canonical = {key: f"{value // 1000}k" if value % 1000 == 0 else str(value) for key, value in wanted.items()}
        self.allocatable.update(canonical)
        self.annotations[hami_plugin.REGISTER_ANNOTATION] = json.dumps(
            [{"id": c["id"], "index": c["index"], "count": c["split_count"], "devmem": c["memory_mb"],
              "devcore": c["cores"], "type": c["type"], "mode": "hami-core", "health": True}
             for c in self.plugin.cards]  # HAMi's own JSON: index 0 omitted there (omitempty) is read as 0
        )  # fmt: skip
        self.log.write_text(f'I1207 "Node device added" nodeName="{NODE}" deviceVendor="NVIDIA"\n')

    def docker(self, *args: str, what: str, stdin: str | None = None, check: bool = True, timeout: float = 60):
        assert args[:3] == ("exec", "-i", NODE), args
        argv = args[3:]
        self.calls.append(argv)
        if stdin is not None:
            self.stdins.append(stdin)
        code, out = 0, ""
        if argv[:2] == ("test", "-x"):
            code = 0 if self.program else 1
        elif argv[0] == "cat":
            code, out = (0, self.files[argv[1]]) if argv[1] in self.files else (1, "")
        elif argv[:2] == ("sh", "-c"):
            path = re.fullmatch(r"umask 077; mkdir -p \S+ && cat > (\S+)", argv[2]).group(1)
            self.files[path], self.modes[path] = stdin or "", "0600"
        elif argv[:2] == ("systemctl", "enable"):
            assert argv[2:] == ("--now", hami_plugin.UNIT)
            self.unit, self.enabled, self.polls, self.registered = "active", True, 0, False
            self.restarts += self.restarts_after_start
        elif argv[:2] == ("systemctl", "stop"):
            self.unit = "inactive"
        elif argv[:2] == ("systemctl", "disable"):
            self.unit, self.enabled = "inactive", False
        elif argv[:2] == ("systemctl", "is-active"):
            out, code = self.unit, 0 if self.unit == "active" else 3
        elif argv[:2] == ("systemctl", "show"):
            assert argv[2:] == ("--property=NRestarts", "--value", hami_plugin.UNIT), argv
            out = str(self.restarts)
        elif argv[0] == "journalctl":
            out = 'gpulab-hami-plugin: registering nvidia.com/gpu with the kubelet: no such file "kubelet.sock"'
        elif argv[:2] == ("rm", "-f"):
            for path in argv[2:]:
                self.files.pop(path, None)
        if check and code != 0:
            raise ProcessLabError(f"{what} failed (exit {code})")
        return subprocess.CompletedProcess(args, code, out, "")

    def kubectl(self, _plane: ControlPlane, *args: str, stdin=None, check: bool = True, timeout: float = 30):
        self.calls.append(("kubectl", *args))
        if not self.api_up:
            raise ProcessLabError("kubectl get on gpulab-tenant-a: no answer within 10 s (kubectl)")
        out = ""
        if args[:2] == ("get", "--raw"):
            pass
        elif args[0] == "apply":
            self.applied = json.loads(stdin)["items"]
        elif args[:2] == ("create", "token"):
            out = TOKEN + "\n"
        elif args[:3] == ("get", "node", NODE):
            if self.unit == "active" and self.registers and not self.registered:
                self.polls += 1
                if self.polls > self.register_after:
                    self.register()
                    self.registered = True
            node = {
                "metadata": {"name": NODE, "annotations": self.annotations},
                "status": {"allocatable": self.allocatable},
            }
            out = json.dumps(node)
        elif args[:3] == ("annotate", "node", NODE):
            assert args[3] == f"{hami_plugin.REGISTER_ANNOTATION}-", args
            self.annotations.pop(hami_plugin.REGISTER_ANNOTATION, None)
        else:
            raise AssertionError(f"unexpected kubectl {args}")
        return subprocess.CompletedProcess(args, 0, out, "")


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    found = Lab(tmp_path, [CARD])
    monkeypatch.setattr(node_containers, "docker", found.docker)  # node_exec and the unit helpers call it
    monkeypatch.setattr(hami_plugin, "running", lambda node: found.running)
    monkeypatch.setattr(ControlPlane, "kubectl", lambda plane, *a, **k: found.kubectl(plane, *a, **k))
    monkeypatch.setattr(hami_plugin.time, "sleep", lambda _s: None)
    monkeypatch.setattr("process_lab.hami_scheduler.time.sleep", lambda _s: None)
    return found


# --- start, serving, stop ------------------------------------------------------------------------------------


def test_start_writes_credentials_settings_and_cards_then_waits_for_kubelet_annotation_and_hami(lab: Lab) -> None:
    lab.annotations[hami_plugin.REGISTER_ANNOTATION] = "[]"  # a former plugin's (or GpuInventory's) must not pass
    expires = hami_plugin.start(lab.plugin, timeout=60)
    assert expires == EXPIRES
    assert lab.applied == hami_plugin.rbac_objects()
    config = json.loads(lab.files[hami_plugin.KUBECONFIG_FILE])
    assert config["clusters"][0]["cluster"] == {"server": "https://172.18.0.1:40123", "certificate-authority-data": CA}
    assert config["users"][0]["user"] == {"token": TOKEN}
    assert lab.files[hami_plugin.ENV_FILE] == "NODE_NAME=tenant-a-worker\nHAMI_VERSION=v2.10.0\nMEMORY_FACTOR=1\n"
    assert json.loads(lab.files[hami_plugin.CARDS_FILE]) == [
        {"id": "GPU-MOCK-tenant-a-0", "index": 0, "type": "NVIDIA-A100-SXM4-80GB", "memory_mb": 81920, "cores": 100,
         "split_count": 10}
    ]  # fmt: skip
    assert set(lab.modes.values()) == {"0600"}
    writes = [c[2].rsplit(" ", 1)[-1] for c in lab.calls if c[:2] == ("sh", "-c")]
    assert writes == [hami_plugin.KUBECONFIG_FILE, hami_plugin.ENV_FILE, hami_plugin.CARDS_FILE], "the cards last"
    order = [c[:2] for c in lab.calls if c[0] in ("systemctl", "kubectl", "sh") and c[:2] != ("kubectl", "get")]
    assert order.index(("kubectl", "annotate")) < order.index(("systemctl", "enable")), order
    assert order.index(("sh", "-c")) < order.index(("systemctl", "enable")), order
    assert lab.enabled and lab.polls == lab.register_after + 1, "waited for the plugin's own registration"
    assert hami_plugin.serving(lab.plugin) is True


def test_the_token_is_never_in_any_argv_nor_in_an_error(lab: Lab) -> None:
    hami_plugin.start(lab.plugin, timeout=60)
    assert not [call for call in lab.calls if any(TOKEN in part for part in call)]
    assert sum(TOKEN in stdin for stdin in lab.stdins) == 1, "only the kubeconfig, on docker exec's stdin"
    token_call = next(c for c in lab.calls if c[:2] == ("kubectl", "create"))
    assert token_call == ("kubectl", "create", "token", hami_plugin.SERVICE_ACCOUNT, "--namespace", "kube-system",
                          f"--duration={hami_plugin.TOKEN_SECONDS}s")  # fmt: skip


def test_a_failed_token_request_says_kubectls_error_only(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(_plane, *args, **_):
        if args[:2] == ("create", "token"):
            return subprocess.CompletedProcess(args, 1, "half-a-token", 'error: serviceaccounts "x" not found')
        return lab.kubectl(_plane, *args, **_)

    monkeypatch.setattr(ControlPlane, "kubectl", refused)
    with pytest.raises(ProcessLabError) as raised:
        hami_plugin.start(lab.plugin, timeout=60)
    assert 'serviceaccounts "x" not found' in str(raised.value) and "half-a-token" not in str(raised.value)
    assert hami_plugin.CARDS_FILE not in lab.files and not lab.enabled


def test_a_plugin_that_does_not_register_is_named_with_what_was_awaited_and_its_units_last_lines(lab: Lab) -> None:
    lab.registers = False
    with pytest.raises(ProcessLabError) as raised:
        hami_plugin.start(lab.plugin, timeout=0)
    said = str(raised.value)
    assert "did not register within 0 s: waited for allocatable nvidia.com/gpu=10, nvidia.com/gpumem=81920, " in said
    assert "nvidia.com/gpumem-percentage=100 and hami.io/node-nvidia-register holding 1 card(s)" in said, said
    assert "found allocatable nvidia.com/gpu=None" in said and "absent or not HAMi's JSON" in said, said
    assert "gpulab-hami-plugin.service is active; its last lines:" in said and "kubelet.sock" in said, said


def test_a_plugin_that_keeps_exiting_ends_the_wait_at_once_with_its_error(lab: Lab) -> None:
    """Seen live: cards with 0.0 for 0 (the engine's numbers) made the plugin exit every 2 s for the whole wait."""
    lab.restarts = 69  # a former start's: not this one's
    hami_plugin.start(lab.plugin, timeout=60)
    lab.registers, lab.restarts_after_start = False, hami_plugin.CRASH_LOOP
    lab.calls = []
    with pytest.raises(ProcessLabError) as raised:
        hami_plugin.start(lab.plugin, timeout=600)
    said = str(raised.value)
    assert f"gpulab-hami-plugin exited {hami_plugin.CRASH_LOOP} times: waited for allocatable" in said, said
    assert "its last lines:" in said, said
    assert sum(call[:3] == ("kubectl", "get", "node") for call in lab.calls) == 1, "no wait for the deadline"


def test_the_engines_numbers_are_written_as_the_whole_numbers_the_plugin_reads(tmp_path: Path) -> None:
    """Boundary: the Pulumi engine hands a dynamic provider every number as a float (seen: the cards file said
    "index": 0.0, and the plugin refused it: "cannot unmarshal number 0.0 into Go struct field Card.index")."""
    props = {"cluster": "c", "bin_dir": str(tmp_path), "folder": str(tmp_path), "node": NODE, "hami_version": "v2.10.0",
             "cards": [{k: float(v) if isinstance(v, int) else v for k, v in CARD.__dict__.items()}]}  # fmt: skip
    plugin = NodePlugin.from_props(props)
    assert hami_plugin.cards_file(plugin).replace(" ", "").replace("\n", "") == (
        '[{"id":"GPU-MOCK-tenant-a-0","index":0,"type":"NVIDIA-A100-SXM4-80GB","memory_mb":81920,"cores":100,'
        '"split_count":10}]'
    )
    assert plugin.token_expires is None and plugin.wanted()["nvidia.com/gpumem"] == 81920
    props["cards"][0]["memory_mb"] = 0.5
    with pytest.raises(ProcessLabError) as raised:
        NodePlugin.from_props(props)
    assert "memory_mb 0.5 is not a whole number" in str(raised.value)


def test_hami_not_registering_the_node_is_named(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lab, "register", lambda: Lab.register(lab) or lab.log.write_text(""))
    with pytest.raises(ProcessLabError) as raised:
        hami_plugin.start(lab.plugin, timeout=60, hami_timeout=0)
    assert "hami-scheduler did not register GPU node(s) tenant-a-worker" in str(raised.value)
    assert "'Node device added'" in str(raised.value)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"running": False}, "the node container tenant-a-worker is not running"),
        ({"program": False}, "`make tools node-image`, then `make down` and `make up`"),
    ],
)
def test_a_node_that_cannot_run_the_plugin_is_named_and_nothing_is_started(lab: Lab, change: dict, says) -> None:
    for key, value in change.items():
        setattr(lab, key, value)
    with pytest.raises(ProcessLabError) as raised:
        hami_plugin.start(lab.plugin)
    assert says in str(raised.value), raised.value
    assert not lab.enabled and hami_plugin.CARDS_FILE not in lab.files and not lab.applied


def test_serving_reads_the_unit_the_node_and_the_tokens_end(lab: Lab) -> None:
    plugin = NodePlugin(lab.plugin.processes, NODE, lab.plugin.cards, "v2.10.0", hami_plugin.start(lab.plugin))
    assert hami_plugin.serving(plugin, now=EXPIRES - 2 * hami_plugin.RENEW_BEFORE) is True
    assert hami_plugin.serving(plugin, now=EXPIRES - hami_plugin.RENEW_BEFORE / 2) is False, "renewed a day ahead"
    lab.allocatable["nvidia.com/gpumem"] = "40k"
    assert hami_plugin.serving(lab.plugin) is False
    lab.allocatable["nvidia.com/gpumem"] = "81920"
    assert hami_plugin.serving(lab.plugin) is True, "quantities are compared as values"
    lab.annotations[hami_plugin.REGISTER_ANNOTATION] = lab.annotations[hami_plugin.REGISTER_ANNOTATION].replace(
        "81920", "40960"
    )
    assert hami_plugin.serving(lab.plugin) is False
    lab.annotations.clear()
    assert hami_plugin.serving(lab.plugin) is False
    lab.api_up = False
    assert hami_plugin.serving(lab.plugin) is None, "an API server down now keeps the resource as it was"
    lab.api_up, lab.unit = True, "failed"
    assert hami_plugin.serving(lab.plugin) is False
    lab.running = False
    assert hami_plugin.serving(lab.plugin) is False


def test_stop_disables_the_unit_removes_its_files_and_the_annotation_and_takes_a_gone_node(lab: Lab) -> None:
    hami_plugin.start(lab.plugin, timeout=60)
    hami_plugin.stop(lab.plugin)
    assert not lab.enabled and lab.unit == "inactive"
    assert set(lab.files) == {"/etc/kubernetes/kubelet.conf"} and not lab.annotations
    lab.running = False  # the node container removed by hand: nothing to exec, the annotation still removed
    lab.annotations[hami_plugin.REGISTER_ANNOTATION] = "[]"
    lab.calls = []
    hami_plugin.stop(lab.plugin)
    assert lab.calls == [("kubectl", "annotate", "node", NODE, f"{hami_plugin.REGISTER_ANNOTATION}-")]
    assert not lab.annotations


def test_kubelet_conf_naming_a_ca_file_is_read_from_the_node(lab: Lab) -> None:
    pem = "-----BEGIN CERTIFICATE-----\nfrom a file\n-----END CERTIFICATE-----\n"
    lab.files["/etc/kubernetes/pki/ca.crt"] = pem
    lab.files["/etc/kubernetes/kubelet.conf"] = KUBELET_CONF.replace(
        f"certificate-authority-data: {CA}", "certificate-authority: /etc/kubernetes/pki/ca.crt"
    )
    assert hami_plugin.kubelet_view(NODE) == ("https://172.18.0.1:40123", base64.b64encode(pem.encode()).decode())
    del lab.files["/etc/kubernetes/kubelet.conf"]
    with pytest.raises(ProcessLabError) as raised:
        hami_plugin.kubelet_view(NODE)
    assert "has it joined?" in str(raised.value)


# --- the plugin's memory factor --------------------------------------------------------------------------------


def test_the_memory_factor_is_one_for_the_labs_nodes_and_the_least_the_plugin_takes_beyond() -> None:
    """tools/gpulab-hami-plugin config_test.go: 163840 MB (two A100s) need --memory-factor 2; about 113 GB fit."""
    most = hami_plugin.max_counted_devices()
    assert most == 123011  # the integration test below holds the plugin to the same bound
    a100s = [card.__dict__ for card in expand_cards("t", [("A100-80GB", 2)])]
    assert hami_plugin.memory_factor(a100s[:1]) == 1 and hami_plugin.memory_factor(a100s) == 2
    assert hami_plugin.advertised(a100s)["nvidia.com/gpumem"] == 81920
    exact = [{**a100s[0], "memory_mb": most}]
    assert hami_plugin.memory_factor(exact) == 1
    assert hami_plugin.memory_factor([{**a100s[0], "memory_mb": most + 1}]) == 2
    for total in (most + 1, 2 * most, 2 * most + 2, 10 * most):
        factor = hami_plugin.memory_factor([{**a100s[0], "memory_mb": total}])
        assert total // factor <= most < total // (factor - 1), total


def test_a_node_whose_cards_need_a_factor_gets_it_in_its_settings_and_its_allocatable(tmp_path: Path) -> None:
    cards = [card.__dict__ for card in expand_cards("tenant-a", [("A100-80GB", 2)])]
    plugin = NodePlugin(TenantProcesses("c", tmp_path, tmp_path), NODE, cards, "v2.8.3")
    assert hami_plugin.env_file(plugin) == "NODE_NAME=tenant-a-worker\nHAMI_VERSION=v2.8.3\nMEMORY_FACTOR=2\n"
    assert plugin.wanted() == {
        "nvidia.com/gpu": 20,
        "nvidia.com/gpumem": 81920,
        "nvidia.com/gpucores": 200,
        "nvidia.com/gpumem-percentage": 200,
    }


@pytest.mark.integration
def test_the_plugin_refuses_factor_one_where_memory_factor_says_and_names_the_same_factor(tmp_path: Path) -> None:
    """The plugin make tools built, run on cards over the limit: the factor its refusal names is ours."""
    program = ROOT / "bin" / "gpulab-hami-plugin"
    if not program.is_file():
        pytest.skip("no bin/gpulab-hami-plugin: make tools")
    most = hami_plugin.max_counted_devices()
    for total, fits in ((most, True), (most + 1, False), (5 * most + 3, False)):
        card = {"id": "GPU-0", "index": 0, "type": "NVIDIA-X", "memory_mb": total, "cores": 100, "split_count": 1}
        (tmp_path / "cards.json").write_text(json.dumps([card]))
        argv = [program, f"--cards={tmp_path / 'cards.json'}", "--node-name=n", "--kubeconfig=/nonexistent"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        factor = hami_plugin.memory_factor([card])
        if fits:
            assert factor == 1 and "--memory-factor" not in done.stderr, done.stderr
        else:
            assert f"pass --memory-factor {factor} or more" in done.stderr, done.stderr


# --- RBAC: exactly the plugin's calls ---------------------------------------------------------------------------


def plugin_calls() -> set[tuple[str, str]]:
    """(resource, verb) of every API call in the plugin's Go source (not its tests), read from client-go's typed
    clients: client.CoreV1().Pods(ns).Get(...), .Nodes().Patch(...)."""
    calls = set()
    groups = set()
    for source in PLUGIN_SOURCE.glob("*.go"):
        if source.name.endswith("_test.go"):
            continue
        text = source.read_text()
        groups |= set(re.findall(r"\.(\w+V\d\w*)\(\)\.", text))
        for resource, verb in re.findall(r"CoreV1\(\)\.(\w+)\([^)]*\)\.(\w+)\(", text):
            calls.add((resource.lower(), verb.lower()))
    assert groups == {"CoreV1"}, f"the plugin calls API groups beyond the core one: {groups}"
    return calls


def test_the_cluster_role_grants_exactly_what_the_plugins_code_calls() -> None:
    calls = plugin_calls()
    assert calls == {("pods", "get"), ("pods", "list"), ("pods", "patch"), ("nodes", "get"), ("nodes", "patch")}
    account, role, binding = hami_plugin.rbac_objects()
    granted = {(resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == calls
    assert all(rule["apiGroups"] == [""] for rule in role["rules"])
    assert (account["kind"], account["metadata"]) == (
        "ServiceAccount",
        {"name": "gpulab-hami-device-plugin", "namespace": "kube-system", "labels": account["metadata"]["labels"]},
    )
    assert role["kind"] == "ClusterRole", 'the plugin lists the pods of every namespace (Pods("").List)'
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "gpulab-hami-device-plugin"}  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpulab-hami-device-plugin", "namespace": "kube-system"}
    ]


# --- the node image ----------------------------------------------------------------------------------------------


def test_the_unit_runs_the_plugin_with_gpulabs_files_and_is_not_enabled_in_the_image() -> None:
    unit = UNIT_FILE.read_text()
    lines = [line for line in unit.splitlines() if line and not line.startswith("#")]
    assert "ConditionPathExists=/etc/gpulab/hami/cards.json" in lines
    assert "EnvironmentFile=/etc/gpulab/hami/env" in lines
    assert "Restart=always" in lines and "After=kubelet.service" in lines
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    assert exec_start.split("=", 1)[1].split() == [
        "/usr/bin/gpulab-hami-plugin",
        f"--cards={hami_plugin.CARDS_FILE}",
        f"--kubeconfig={hami_plugin.KUBECONFIG_FILE}",
        "--node-name=${NODE_NAME}",
        "--hami-version=${HAMI_VERSION}",
        "--memory-factor=${MEMORY_FACTOR}",
    ]
    assert hami_plugin.PROGRAM == "/usr/bin/gpulab-hami-plugin" and UNIT_FILE.name == hami_plugin.UNIT
    settings = hami_plugin.env_file(NodePlugin(None, NODE, [CARD.__dict__], "v2.10.0"))  # type: ignore[arg-type]
    written = {line.split("=", 1)[0] for line in settings.splitlines()}
    assert written == set(re.findall(r"\$\{(\w+)\}", exec_start)), "the env file sets every variable ExecStart uses"
    script = (ROOT / "node-image" / "build.sh").read_text()
    enabled = next(line for line in script.splitlines() if "systemctl enable" in line)
    assert "gpulab-hami-plugin" not in enabled
    assert "programs+=(gpulab-hami-plugin)" in script and '"$stage/usr/bin/$program"' in script
    assert "LABEL gpulab.io/node-image.hami-plugin=sha256:$hami_plugin_sha256" in script
    makefile = (ROOT / "Makefile").read_text()
    assert "-m tools.build kubelet kubeadm kubectl gpulab-dra-plugin gpulab-hami-plugin;" in makefile


def test_preflight_names_a_hami_tenants_node_image_without_the_plugin_or_with_another_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Boundary: `docker image inspect -f '{{json .Config.Labels}}'` as Docker answers it (null for no labels)."""
    from boundary.bounded_run import BoundedResult
    from process_lab import preflight

    plugin = tmp_path / "gpulab-hami-plugin"
    plugin.write_bytes(b"the plugin make tools built")
    digest = "sha256:" + hashlib.sha256(plugin.read_bytes()).hexdigest()
    labels: dict[str, object] = {}

    def docker(argv, _timeout, **_):
        answer = json.dumps(labels.get("value")).encode() if argv[:3] == ["docker", "image", "inspect"] else b""
        return BoundedResult(list(argv), 0, answer, b"", False, 30.0, 0.1)

    monkeypatch.setattr(preflight, "run_bounded", docker)
    image = ("gpulab/node:v1.36.4",)
    said = preflight.docker_problems(image, False, (), tmp_path, image)
    assert len(said) == 1 and "carries no gpulab-hami-plugin label" in said[0], said
    assert "HAMi's device plugin a HAMi tenant's real node runs" in said[0] and "make tools node-image" in said[0]
    labels["value"] = {preflight.HAMI_PLUGIN_LABEL: "sha256:" + "0" * 64}
    said = preflight.docker_problems(image, False, (), tmp_path, image)
    assert len(said) == 1 and "holds another gpulab-hami-plugin" in said[0] and "`make node-image`" in said[0]
    labels["value"] = {preflight.HAMI_PLUGIN_LABEL: digest}
    assert preflight.docker_problems(image, False, (), tmp_path, image) == []
    labels["value"] = None
    assert preflight.docker_problems(image, False, (), tmp_path) == [], "a tenant without HAMi does not need it"


def test_the_stacks_say_which_node_images_need_the_hami_plugin() -> None:
    from process_lab.preflight import stack_needs

    assert stack_needs("nodes")[3] == ("gpulab/node:v1.36.4",)
    assert stack_needs("nodes-without-hami")[3] == ()
    assert stack_needs("sim")[1:] == ((), (), ())


# --- HAMi without the bind-time role -----------------------------------------------------------------------------


def hami_props(tmp_path: Path, **extra) -> dict:
    settings = {"node_scheduler_policy": "binpack", "gpu_scheduler_policy": "spread", "node_lock_timeout": "2s",
                "split_count": 10}  # fmt: skip
    return {"cluster": "gpulab-tenant-a", "bin_dir": str(tmp_path), "folder": str(tmp_path / "tenant-a"),
            "hami_binary": str(tmp_path / "hami-scheduler"), "hami_port": 1, "hami_metrics_port": 2,
            "settings": settings, **extra}  # fmt: skip


@pytest.mark.parametrize(("extra", "role"), [({}, True), ({"without_bind_time_role": True}, False)])
def test_hami_starts_the_bind_time_role_unless_told_a_device_plugin_plays_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict, role: bool
) -> None:
    from process_lab import tenant_hami

    started: list[list] = []

    def serve(scheduler, *_args) -> None:
        scheduler.process = type("Process", (), {"pid": 4242})()

    monkeypatch.setattr(tenant_hami, "serve", serve)
    monkeypatch.setattr(tenant_hami, "start_detached", lambda argv, **_: started.append(argv) or 4343)
    hami = tenant_hami.TenantHami.from_props(hami_props(tmp_path, **extra))
    assert hami.bind_time_role is role
    running = tenant_hami.start(hami)
    assert running.hami_pid == 4242
    if role:
        assert running.bind_time_pid == 4343 and started[0][:3] == [sys.executable, "-m", "process_lab.device_plugin"]
    else:
        assert running.bind_time_pid is None and not started


def test_hami_without_the_role_is_alive_on_hami_scheduler_alone(tmp_path: Path, monkeypatch) -> None:
    from process_lab import tenant_hami

    monkeypatch.setattr(tenant_hami, "is_ours", lambda pid, folder: pid == 4242)
    alone = tenant_hami.RunningHami(4242, None)
    assert alone.alive(tmp_path, bind_time_role=False)
    assert not alone.alive(tmp_path), "with the role expected, a missing role is found stopped"
    assert not tenant_hami.RunningHami(4241, None).alive(tmp_path, bind_time_role=False)


# --- the dynamic resource's provider -----------------------------------------------------------------------------


@pytest.mark.parametrize(("found", "running"), [(True, True), (False, False), (None, True)])
def test_a_refresh_keeps_the_tokens_end_an_output_and_finds_a_stopped_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, found: bool | None, running: bool
) -> None:
    """Seen live: with the token's end among the read inputs, every `make up` (--refresh) showed the plugin as
    `refresh [diff: +token_expires]`."""
    from components.process.hami_plugin import HamiPluginProvider

    monkeypatch.setattr(hami_plugin, "serving", lambda plugin: found)
    props = {"cluster": "c", "bin_dir": str(tmp_path), "folder": str(tmp_path), "control_plane": "i", "node": NODE,
             "cards": [CARD.__dict__], "hami_version": "v2.10.0", "worker": "w", "running": True,
             "token_expires": float(EXPIRES)}  # fmt: skip
    read = HamiPluginProvider().read("c/tenant-a-worker/hami-plugin", props)
    assert "token_expires" not in read.inputs and read.outs["token_expires"] == EXPIRES
    assert read.outs["running"] is running and read.inputs["running"] is running
    diff = HamiPluginProvider().diff("id", read.outs, {**props, "token_expires": None})
    assert diff.changes is not running and not diff.replaces, "a stopped plugin is started again in place"


def test_the_node_images_kubelet_runs_without_resource_health_status() -> None:
    """Boundary: kubelet v1.36.4's device manager with ResourceHealthStatus on (seen: a restarted kubelet whose three
    pods held 60000 of the plugin's 81920 gpumem devices spent over 12 minutes at one core before the node had its
    resources again; with the gate off, 2 s). kubeadm's drop-in reads the file; the flag names the gate that
    depends on it too, else the kubelet refuses to start."""
    flags = (ROOT / "node-image" / "files" / "etc" / "default" / "kubelet").read_text()
    lines = [line for line in flags.splitlines() if line and not line.startswith("#")]
    assert lines == ["KUBELET_EXTRA_ARGS=--feature-gates=ResourceHealthStatus=false,ResourceHealthStatusMessage=false"]
    dropin = ROOT / "node-image" / "files" / "etc" / "systemd" / "system" / "kubelet.service.d" / "10-kubeadm.conf"
    assert "EnvironmentFile=-/etc/default/kubelet" in dropin.read_text().splitlines()
