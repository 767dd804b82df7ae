"""A HAMi tenant's real node: gpulab's HAMi device plugin (tools/gpulab-hami-plugin, in the node image) started in
the node container with the node's cards, and the wait until the kubelet, the API server and HAMi all have them.

On a real node (workers: containers) the plugin is HAMi's device plugin, as HAMi's NVIDIA plugin is on a node with
GPUs: it registers nvidia.com/gpu (split_count per card, as HAMi's plugin does) and, as the upstream mock plugin does,
nvidia.com/gpumem, nvidia.com/gpucores and nvidia.com/gpumem-percentage with the kubelet, which puts them in the
node's capacity; it writes the node's `hami.io/node-nvidia-register` annotation; and the kubelet calls its Allocate
for each GPU container, where it gives the container HAMi-core's environment,
marks the pod `hami.io/bind-phase: success` and releases HAMi's node lock. Nothing else writes the annotation or
the capacity there (KWOK nodes, which have no kubelet, keep process_lab/node_inventory.py and the bind-time role of
process_lab/device_plugin.py).

The plugin runs as the node's systemd unit gpulab-hami-plugin.service (node-image/files), with credentials of its
own: the kubelet's may not patch a pod's annotations. They are a ServiceAccount's token (RBAC: exactly the calls of
the plugin's code, `RULES`), which goes from kubectl's stdout into the node's kubeconfig file through `docker exec
-i`'s stdin: never printed, never in any process's argv. The kubeconfig names the API server and its CA as the
node's kubelet has them (its /etc/kubernetes/kubelet.conf: the relay on the lab network's gateway). Process mode's
HamiPluginProvider (components/process/hami_plugin.py) is a thin adaptor over this module.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import time
from dataclasses import dataclass
from typing import Any

import yaml

from hami.annotations import AnnotationError, parse_register
from model.catalog import (
    GPU_RESOURCE,
    GPUCORES_RESOURCE,
    GPUMEM_PERCENTAGE_RESOURCE,
    GPUMEM_RESOURCE,
    REGISTER_ANNOTATION,
)

# The plugin's identity and RBAC (exactly its calls: model/kube_objects/hami_device_plugin.py RULES) and its cards
# file's keys are the Docker lab's DaemonSet's too: one definition for both runtimes.
from model.kube_objects.hami_device_plugin import CARD_KEYS, NAMESPACE, rbac_objects
from model.kube_objects.hami_device_plugin import NAME as SERVICE_ACCOUNT
from model.quantity import parse_quantity
from process_lab.commands import ProcessLabError
from process_lab.hami_scheduler import wait_for_registered
from process_lab.node_containers import node_exec, running, unit_report, unit_state
from process_lab.stack import TenantProcesses

CONFIG_DIR = "/etc/gpulab/hami"
CARDS_FILE = f"{CONFIG_DIR}/cards.json"  # the unit's ConditionPathExists and --cards: written last
KUBECONFIG_FILE = f"{CONFIG_DIR}/kubeconfig"  # the unit's --kubeconfig
ENV_FILE = f"{CONFIG_DIR}/env"  # the unit's EnvironmentFile: NODE_NAME, HAMI_VERSION, MEMORY_FACTOR
UNIT = "gpulab-hami-plugin.service"
PROGRAM = "/usr/bin/gpulab-hami-plugin"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"  # kubeadm join's: the API server and CA as the kubelet sees them

TOKEN_SECONDS = 30 * 24 * 3600  # asked of the API server (it may give less); a refresh renews it a day ahead
RENEW_BEFORE = 24 * 3600
START_TIMEOUT = 120  # seconds from the unit's start to the node carrying the plugin's resources and cards
HAMI_TIMEOUT = 60  # seconds more for HAMi to take the node in (its registration pass runs every 15 s)
CRASH_LOOP = 3  # restarts of the unit since its start that end the wait at once: its input is refused
KUBECTL_TIMEOUT = 20

# The kubelet receives at most 4 MiB in one ListAndWatch message (grpc-go's default), and the plugin lists one
# nvidia.com/gpumem device per MB (÷ the memory factor), each "mock-devices-id-<i>": tools/gpulab-hami-plugin
# devices.go kubeletMaxMessage, mockDeviceID and entrySize, whose arithmetic memory_factor repeats.
KUBELET_MAX_MESSAGE = 4 * 1024 * 1024
HEALTHY = "Healthy"


@dataclass(frozen=True)
class NodePlugin:
    """One real node's HAMi plugin: the tenant's processes (its API server, hami-scheduler's log), the node (its
    container's name), its cards as gpulab writes them for the plugin, the tenant's HAMi release, and when the
    plugin's token expires (None before it has one)."""

    processes: TenantProcesses
    node: str
    cards: list[dict[str, Any]]
    hami_version: str
    token_expires: float | None = None

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> NodePlugin:
        """A provider's props. The engine hands every number over as a float (81920.0): the plugin takes whole
        numbers only (config.go ReadCards), so they are made whole again here."""
        expires = props.get("token_expires")
        return cls(
            TenantProcesses.from_props(props),
            props["node"],
            [_card(card) for card in props["cards"]],
            str(props["hami_version"]),
            None if expires is None else float(expires),
        )

    @property
    def memory_factor(self) -> int:
        return memory_factor(self.cards)

    def wanted(self) -> dict[str, int]:
        return advertised(self.cards)


WHOLE = ("index", "memory_mb", "cores", "split_count")


def _card(card: dict[str, Any]) -> dict[str, Any]:
    found = {key: card[key] for key in CARD_KEYS}
    for key in WHOLE:
        value = found[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ProcessLabError(f"card {found['id']!r}: {key} {value!r} is not a whole number")
        found[key] = int(value)
    return found


# --- the plugin's arithmetic --------------------------------------------------------------------------------


def total_memory(cards: list[dict[str, Any]]) -> int:
    return sum(int(card["memory_mb"]) for card in cards)


def _varint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


@functools.cache
def max_counted_devices() -> int:
    """The most counted devices one ListAndWatch message to the kubelet holds (devices.go maxCountedDevices)."""
    size, index = 0, 0
    while True:
        name = len(f"mock-devices-id-{index}")
        device = 1 + _varint_size(name) + name + 1 + _varint_size(len(HEALTHY)) + len(HEALTHY)
        size += 1 + _varint_size(device) + device
        if size > KUBELET_MAX_MESSAGE:
            return index
        index += 1


def advertised(cards: list[dict[str, Any]]) -> dict[str, int]:
    """A node's allocatable as the plugin registers its cards with the kubelet (devices.go gpuDevices,
    gpumemDevices, gpucoresDevices, gpumemPercentageDevices: 100 per card, as the upstream mock registers it)."""
    return {
        GPU_RESOURCE: sum(int(card["split_count"]) for card in cards),
        GPUMEM_RESOURCE: total_memory(cards) // memory_factor(cards),
        GPUCORES_RESOURCE: sum(int(card["cores"]) for card in cards),
        GPUMEM_PERCENTAGE_RESOURCE: 100 * len(cards),
    }


def memory_factor(cards: list[dict[str, Any]]) -> int:
    """1 when the node's memory fits one gpumem device per MB; else the least factor the plugin accepts (the one
    its refusal names: config.go CheckMemoryFactor). 123011 MB of cards fit at factor 1."""
    total, most = total_memory(cards), max_counted_devices()
    return 1 if total <= most else total // (most + 1) + 1


# --- the node ------------------------------------------------------------------------------------------------


def _write(node: str, path: str, text: str, what: str) -> None:
    """A file of the node written from stdin, readable by root only (it may hold the token)."""
    folder = path.rsplit("/", 1)[0]
    script = f"umask 077; mkdir -p {folder} && cat > {path}"
    written = node_exec(node, "sh", "-c", script, stdin=text, what=f"writing {what} on {node}", check=False)
    if written.returncode != 0:  # the error only: the text written is never echoed
        raise ProcessLabError(f"writing {what} ({path}) on {node} failed: {written.stderr.strip()[-300:]}")


def kubelet_view(node: str) -> tuple[str, str]:
    """(the API server's address, its CA as base64 PEM) from the node's kubelet.conf, as its kubelet talks to it."""
    text = node_exec(node, "cat", KUBELET_CONF, what=f"reading {node}'s {KUBELET_CONF}", check=False)
    if text.returncode != 0:
        raise ProcessLabError(f"{node} has no readable {KUBELET_CONF} (has it joined?): {text.stderr.strip()[-300:]}")
    config = yaml.safe_load(text.stdout) or {}
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    context = contexts.get(config.get("current-context")) or next(iter(contexts.values()), {})
    cluster = clusters.get(context.get("cluster")) or next(iter(clusters.values()), {})
    server, ca = cluster.get("server"), cluster.get("certificate-authority-data")
    if not ca and cluster.get("certificate-authority"):
        pem = node_exec(node, "cat", cluster["certificate-authority"], what=f"reading {node}'s CA", check=False)
        ca = base64.b64encode(pem.stdout.encode()).decode() if pem.returncode == 0 else None
    if not server or not ca:
        raise ProcessLabError(f"{node}'s {KUBELET_CONF} names no API server and CA (server {server!r})")
    return server, ca


def token_expiry(token: str) -> float | None:
    """The `exp` claim of a service account token (a JWT), in seconds since the epoch; None when it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError, binascii.Error):
        return None


def kubeconfig(server: str, ca: str, token: str) -> str:
    """The plugin's kubeconfig (JSON, which is YAML): the kubelet's API server and CA, the ServiceAccount's token."""
    name = SERVICE_ACCOUNT
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "tenant", "cluster": {"server": server, "certificate-authority-data": ca}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "tenant", "user": name, "namespace": NAMESPACE}}],
            "current-context": name,
        }
    )


def _credentials(plugin: NodePlugin) -> float | None:
    """The ServiceAccount and its RBAC applied, a token made for it, and the node's kubeconfig written: when the
    token expires."""
    control_plane = plugin.processes.control_plane
    control_plane.apply(rbac_objects())
    made = control_plane.kubectl(
        "create", "token", SERVICE_ACCOUNT, "--namespace", NAMESPACE, f"--duration={TOKEN_SECONDS}s",
        check=False, timeout=KUBECTL_TIMEOUT,
    )  # fmt: skip
    token = made.stdout.strip()
    if made.returncode != 0 or token.count(".") != 2:  # the error only: stdout may hold a token
        raise ProcessLabError(
            f"kubectl create token {SERVICE_ACCOUNT} on {control_plane.name} failed (exit {made.returncode}): "
            f"{made.stderr.strip()[-300:]}"
        )
    server, ca = kubelet_view(plugin.node)
    _write(plugin.node, KUBECONFIG_FILE, kubeconfig(server, ca, token), "the HAMi plugin's kubeconfig")
    return token_expiry(token)


def env_file(plugin: NodePlugin) -> str:
    return f"NODE_NAME={plugin.node}\nHAMI_VERSION={plugin.hami_version}\nMEMORY_FACTOR={plugin.memory_factor}\n"


def cards_file(plugin: NodePlugin) -> str:
    """The cards as the plugin reads them (config.go Card: exactly these keys, whole numbers)."""
    return json.dumps([_card(card) for card in plugin.cards], indent=2)


# --- what the API server and HAMi have -----------------------------------------------------------------------


def _card_type(kind: str) -> str:
    """The type HAMi registers: NVIDIA- before a name that does not start with NVIDIA (hami.go cardType)."""
    return kind if kind.startswith("NVIDIA") else f"NVIDIA-{kind}"


def registered_cards(annotation: str | None) -> list[tuple] | None:
    """The cards of a register annotation, (id, index, count, devmem, devcore, type) each in order, as HAMi reads
    them (hami/annotations.py `parse_register`: HAMi's JSON omits zero values, so an absent field is 0); None when
    it is absent or not HAMi's JSON."""
    if not annotation:
        return None
    try:
        devices = parse_register(annotation)
    except AnnotationError:
        return None
    return [(d.id, d.index, d.count, d.devmem, d.devcore, d.type) for d in devices]


def wanted_cards(plugin: NodePlugin) -> list[tuple]:
    """The cards as the register annotation should hold them (hami.go RegisterAnnotation), in the file's order."""
    cards = plugin.cards
    return [(str(c["id"]), int(c["index"]), int(c["split_count"]), int(c["memory_mb"]), int(c["cores"]),
             _card_type(str(c["type"]))) for c in cards]  # fmt: skip


def _quantity(value: Any) -> int | None:
    try:
        exact = parse_quantity(str(value))
    except ValueError:
        return None
    return int(exact) if exact.denominator == 1 else None


@dataclass(frozen=True)
class Seen:
    """What the API server has of the node: its allocatable GPU resources and its register annotation's cards."""

    allocatable: dict[str, int | None]
    cards: list[tuple] | None


def seen(plugin: NodePlugin) -> Seen | None:
    """The node as the API server has it now; None when it does not answer (or has no such node)."""
    control_plane = plugin.processes.control_plane
    try:
        answer = control_plane.kubectl("get", "node", plugin.node, "-o", "json", check=False, timeout=10)
    except ProcessLabError:
        return None
    if answer.returncode != 0:
        return None
    node = json.loads(answer.stdout)
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    annotation = ((node.get("metadata") or {}).get("annotations") or {}).get(REGISTER_ANNOTATION)
    found = {key: _quantity(allocatable[key]) if key in allocatable else None for key in plugin.wanted()}
    return Seen(found, registered_cards(annotation))


def carries(plugin: NodePlugin, found: Seen) -> bool:
    return found.allocatable == plugin.wanted() and found.cards == wanted_cards(plugin)


def _take_annotation_off(plugin: NodePlugin) -> None:
    """The node's register annotation removed where the API server answers (an API server gone is fine: the node
    lives only in that control plane's etcd)."""
    control_plane = plugin.processes.control_plane
    if control_plane.kubeconfig.exists():
        control_plane.kubectl("annotate", "node", plugin.node, f"{REGISTER_ANNOTATION}-", check=False, timeout=20)


def _restarts(node: str) -> int:
    """How many times systemd restarted the unit (a plugin that exits on its input does so every 2 s:
    RestartSec)."""
    argv = ("systemctl", "show", "--property=NRestarts", "--value", UNIT)
    shown = node_exec(node, *argv, what=f"asking {node}'s systemd", check=False).stdout.strip()
    return int(shown) if shown.isdigit() else 0


def _describe(plugin: NodePlugin, found: Seen | None) -> str:
    if found is None:
        return "the API server did not answer for the node"
    allocatable = ", ".join(f"{key}={value}" for key, value in found.allocatable.items())
    if found.cards is None:
        annotation = "absent or not HAMi's JSON"
    elif found.cards == wanted_cards(plugin):
        annotation = "the cards"
    else:
        annotation = f"other cards ({', '.join(card[0] for card in found.cards) or 'none'})"
    return f"allocatable {allocatable}; {REGISTER_ANNOTATION}: {annotation}"


def start(
    plugin: NodePlugin, timeout: float = START_TIMEOUT, interval: float = 1.0, hami_timeout: float = HAMI_TIMEOUT
) -> float | None:
    """The plugin started on its node (start_on_node), then the wait (`hami_timeout`) until HAMi has registered
    the node. Returns when the plugin's token expires."""
    expires = start_on_node(plugin, timeout, interval)
    # HAMi takes the node in on its next registration pass (on the node's update, or its 15 s tick).
    log = plugin.processes.folder / "hami-scheduler.log"
    wait_for_registered(log, [plugin.node], timeout=hami_timeout)
    return expires


def start_on_node(plugin: NodePlugin, timeout: float = START_TIMEOUT, interval: float = 1.0) -> float | None:
    """Credentials, env and cards written, the unit (re)started, then the wait (`timeout`) until the node's
    allocatable holds the plugin's resources and its register annotation the cards: what the kubelet and the API
    server have of it, with or without a HAMi to read them. Returns when the plugin's token expires."""
    node = plugin.node
    if not running(node):
        raise ProcessLabError(f"the node container {node} is not running (docker ps -a): `make up` makes it again")
    if node_exec(node, "test", "-x", PROGRAM, what=f"looking for {PROGRAM} in {node}", check=False).returncode != 0:
        raise ProcessLabError(
            f"{node} runs an image without {PROGRAM}, HAMi's device plugin on a HAMi tenant's real node (a node "
            "container made before the plugin was in gpulab's node image): `make tools node-image`, then "
            "`make down` and `make up` (a running node container keeps the image it was made from)"
        )
    node_exec(node, "systemctl", "stop", UNIT, what=f"stopping {UNIT} on {node}", check=False)
    # A former plugin's annotation must not pass for this one's: a plugin writes it only once the kubelet has its
    # devices (each resource's first list), which the node's allocatable, still showing a former plugin's, cannot say.
    _take_annotation_off(plugin)
    expires = _credentials(plugin)
    _write(node, ENV_FILE, env_file(plugin), "the HAMi plugin's settings")
    _write(node, CARDS_FILE, cards_file(plugin), "the node's cards")
    # systemd counts restarts across explicit starts (seen: systemd 252 kept NRestarts at 69 over a stop and a
    # start): the count the wait judges is the one since this start.
    before = _restarts(node)
    # Enabled, so that a node container started again runs it at boot.
    node_exec(node, "systemctl", "enable", "--now", UNIT, what=f"starting {UNIT} on {node}")
    deadline = time.monotonic() + timeout
    wanted = ", ".join(f"{key}={value}" for key, value in plugin.wanted().items())
    while (found := seen(plugin)) is None or not carries(plugin, found):
        if (restarts := _restarts(node) - before) >= CRASH_LOOP or time.monotonic() >= deadline:
            ended = f"exited {restarts} times" if restarts >= CRASH_LOOP else f"did not register within {timeout:.0f} s"
            raise ProcessLabError(
                f"{node}: gpulab-hami-plugin {ended}: waited for allocatable "
                f"{wanted} and {REGISTER_ANNOTATION} holding {len(plugin.cards)} card(s); found "
                f"{_describe(plugin, found)}. {unit_report(node, UNIT)}"
            )
        time.sleep(interval)
    return expires


def serving(plugin: NodePlugin, now: float | None = None) -> bool | None:
    """Whether the plugin runs on its node, its token is not about to expire, and the node carries what it
    registers; None when the tenant's API server does not answer now (a refresh then keeps the resource)."""
    if not running(plugin.node):
        return False
    if unit_state(plugin.node, UNIT) != "active":
        return False
    now = time.time() if now is None else now
    if plugin.token_expires is not None and plugin.token_expires - RENEW_BEFORE <= now:
        return False  # started again by `make up`, with a new token
    if not plugin.processes.control_plane.answers():
        return None
    found = seen(plugin)  # None here: the API server answers and has no such node
    return found is not None and carries(plugin, found)


def stop(plugin: NodePlugin) -> None:
    """The unit stopped and disabled and its files gone (where the node container still runs), then the node's
    register annotation removed where the API server answers. The ServiceAccount and its RBAC stay: they are the
    tenant's, removed with its control plane."""
    if running(plugin.node):
        node_exec(
            plugin.node, "systemctl", "disable", "--now", UNIT, what=f"stopping {UNIT} on {plugin.node}", check=False
        )
        remove = ("rm", "-f", CARDS_FILE, ENV_FILE, KUBECONFIG_FILE)
        node_exec(plugin.node, *remove, what=f"removing {plugin.node}'s HAMi plugin files", check=False)
    _take_annotation_off(plugin)
