"""HAMi's annotations: every key gpulab reads or writes, and the one reader (and writer) of each value.

Read at Project-HAMi/HAMi tags v2.8.3 and v2.10.0, where the formats are the same unless said; gpulab's HAMi device
plugin writes them in Go (tools/gpulab-hami-plugin/hami.go). Every reader here raises `AnnotationError` for a value
HAMi did not write, naming the annotation, the value (cut short) and what was expected; each caller decides what
that means for it (the checker: bad input; the report: a line saying what it could not count).

- node `hami.io/node-nvidia-register` (pkg/device/nvidia/device.go `RegisterAnnos`): HAMi's `[]*DeviceInfo` as JSON
  (pkg/device/devices.go `DeviceInfo`, `MarshalNodeDevices`), read by `UnMarshalNodeDevices` (nvidia/device.go
  `GetNodeDevices`; the older `DecodeNodeDevices` text is not read there). Every field is `omitempty`: a zero value
  is absent and reads as 0, "" or false. v2.8.3 adds `"devicepairscore":{}` to each device, v2.10.0 may add
  `migProfiles`; neither is read here. Go's decoder matches keys regardless of case and wants whole numbers.
- pod `hami.io/vgpu-devices-allocated` (`SupportDevices`: what the scheduler counts, scheduler.go `onAddPod`) and
  `hami.io/vgpu-devices-to-allocate` (`InRequestDevices`: what the device plugin allocates), written together
  (nvidia/device.go `PatchAnnotations`): `UUID,TYPE,MB,CORES:` per card and `;` after each container
  (devices.go `EncodeContainerDevices`, `EncodePodSingleDevice`). `DecodeContainerDevices` skips a part without a
  comma (gpulab refuses one that is not blank: HAMi never writes it) and refuses one of fewer than four fields
  (more are read); `DecodePodDevices` splits at `;`. v2.10.0 lists init containers first and keeps every
  container's part, empty ones too, so a part's position is its container's (devices.go `Resourcereqs` 639-692,
  `DecodePodDevices` 529-556); v2.8.3 lists app containers only. A number that is not a base-10 int32 is an error
  at v2.10.0 (`strconv.ParseInt(_, 10, 32)`) and silently 0 at v2.8.3: gpulab refuses to guess at either.
- pod `hami.io/bind-phase`: `allocating` (the scheduler's Bind), then `success` or `failed` (the device plugin's
  Allocate); `hami.io/bind-time`: the Bind's Unix seconds; `hami.io/vgpu-node`: the node HAMi chose
  (pkg/util/types.go).
- node `hami.io/mutex.lock` (pkg/util/nodelock/nodelock.go `NodeLockKey`): `<RFC3339>,<namespace>,<pod>`
  (`GenerateNodeLockKeyByPod`), or the older timestamp alone (`ParseNodeLock` reads both).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

# --- keys ---------------------------------------------------------------------------------------------------------
REGISTER = "hami.io/node-nvidia-register"  # node: its cards (pkg/device/nvidia/device.go RegisterAnnos)
ALLOCATED = "hami.io/vgpu-devices-allocated"  # pod: its cards, as the scheduler counts them
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"  # pod: its cards, as the device plugin allocates them
ASSIGNED_NODE = "hami.io/vgpu-node"  # pod: the node HAMi chose (pkg/util/types.go AssignedNodeAnnotations)
ASSIGNED_TIME = "hami.io/vgpu-time"  # pod: when (AssignedTimeAnnotations)
BIND_TIME = "hami.io/bind-time"  # pod: the Bind's Unix seconds (BindTimeAnnotations)
BIND_PHASE = "hami.io/bind-phase"  # pod: allocating, success, failed (DeviceBindPhase)
NODE_LOCK = "hami.io/mutex.lock"  # node: the lock of a Bind (pkg/util/nodelock/nodelock.go NodeLockKey)
# Read by the scheduler from a pod or node (pkg/util/types.go; hami/cards.py, hami/nodes.py, placement/workloads.py).
GPU_SCHEDULER_POLICY = "hami.io/gpu-scheduler-policy"  # pod: its card policy
NODE_SCHEDULER_POLICY = "hami.io/node-scheduler-policy"  # pod: its node policy (NodeSchedulerPolicyAnnotationKey)
DEVICE_SCORING_WEIGHTS = "hami.io/device-scoring-weights"  # pod, v2.10.0 (DeviceScoringWeightsAnnotationKey)
DEVICE_CORDON = "hami.io/device-cordon"  # node, v2.10.0: the card ids not to use

# Bind-phase values (pkg/util/types.go DeviceBindAllocating, DeviceBindSuccess, DeviceBindFailed).
ALLOCATING, SUCCESS, FAILED = "allocating", "success", "failed"
BIND_PHASES = (ALLOCATING, SUCCESS, FAILED)

SHOWN = 80  # characters of a bad value an error shows
INT32 = (-(2**31), 2**31 - 1)


class AnnotationError(ValueError):
    """An annotation's value that is not what HAMi writes: the key, the value (cut short), what was expected."""

    def __init__(self, key: str, value: str, problem: str, expected: str) -> None:
        self.key, self.value, self.problem, self.expected = key, value, problem, expected
        super().__init__(f"{key} {shown(value)}: {problem}; expected {expected}")


def shown(value: str) -> str:
    """A value as an error shows it: quoted, on one line, at most SHOWN characters of it."""
    return repr(value) if len(value) <= SHOWN else f"{value[:SHOWN]!r}... ({len(value)} characters)"


def _go_int(text: str, low: int, high: int) -> int | None:
    """`strconv.ParseInt(text, 10, bits)`: an optional sign and ASCII digits, within [low, high]; else None."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if low <= value <= high else None


# --- the allocation annotation -----------------------------------------------------------------------------------
ALLOCATION_FORMAT = "`UUID,TYPE,MB,CORES:` per card and `;` after each container, MB and cores base-10 int32"


@dataclass(frozen=True)
class CardShare:
    """One card of one container (devices.go `ContainerDevice`: UUID, Type, Usedmem in MB, Usedcores in %)."""

    card: str
    type: str
    memory_mb: int
    cores: int


Containers = tuple[tuple[CardShare, ...], ...]  # each container's cards, in the annotation's order


def parse_allocation(value: str, key: str = ALLOCATED) -> Containers:
    """The allocation annotation `value` (of `key`) as each container's cards, in its order; every part kept, empty
    ones too (a trailing `;` makes a last, empty one), so a part's position is its container's (v2.10.0)."""
    containers = []
    for part in value.split(";"):
        shares = []
        for entry in part.split(":"):
            if "," not in entry:
                if entry.strip():
                    raise AnnotationError(key, value, f"entry {entry!r} is not UUID,TYPE,MB,CORES", ALLOCATION_FORMAT)
                continue
            fields = entry.split(",")
            if len(fields) < 4:
                raise AnnotationError(key, value, f"entry {entry!r} is not UUID,TYPE,MB,CORES", ALLOCATION_FORMAT)
            memory, cores = _go_int(fields[2], *INT32), _go_int(fields[3], *INT32)
            if memory is None or cores is None:
                raise AnnotationError(key, value, f"entry {entry!r} has a non-numeric MB or cores", ALLOCATION_FORMAT)
            shares.append(CardShare(fields[0], fields[1], memory, cores))
        containers.append(tuple(shares))
    return tuple(containers)


def format_allocation(containers: Iterable[Iterable[CardShare]]) -> str:
    """The annotation HAMi writes for these containers' cards (devices.go `EncodePodSingleDevice`)."""
    return "".join(
        "".join(f"{s.card},{s.type},{s.memory_mb},{s.cores}:" for s in shares) + ";" for shares in containers
    )


@dataclass(frozen=True)
class PodAllocation:
    """A pod's cards, init containers' apart (v2.10.0 lists them first; v2.8.3 has none)."""

    init: Containers
    app: Containers

    def entries(self) -> list[tuple[bool, str, int, int]]:
        """(init?, card, MB, cores) per card share: what hami/nodes.py `collapsed_use` takes."""
        return [
            (init, share.card, share.memory_mb, share.cores)
            for init, containers in ((True, self.init), (False, self.app))
            for shares in containers
            for share in shares
        ]

    def cards(self) -> list[str]:
        return [card for _, card, _, _ in self.entries()]


def pod_allocation(value: str, init_containers: int, init_first: bool, key: str = ALLOCATED) -> PodAllocation:
    """The allocation annotation of a pod with `init_containers` init containers, as its release reads it:
    `init_first` (v2.10.0, hami/releases.py `Rules.init_containers_counted`) takes the first `init_containers`
    parts as theirs; else (v2.8.3) every part is an app container's."""
    containers = parse_allocation(value, key)
    split = init_containers if init_first else 0
    return PodAllocation(containers[:split], containers[split:])


# --- the register annotation -------------------------------------------------------------------------------------
REGISTER_FORMAT = 'a JSON list of HAMi\'s devices, [{"id":"GPU-...","count":10,"devmem":<MB>,"devcore":100,...}]'


@dataclass(frozen=True)
class RegisteredDevice:
    """One card of the register annotation (devices.go `DeviceInfo`, the fields gpulab reads, in its order)."""

    id: str = ""
    index: int = 0
    count: int = 0  # containers that may share it (deviceSplitCount)
    devmem: int = 0  # MB
    devcore: int = 0  # percent: 100 a whole card
    type: str = ""
    numa: int = 0
    mode: str = ""
    health: bool = False


# field -> (what Go's decoder wants, the range of a number)
_FIELDS: dict[str, tuple[type, tuple[int, int] | None]] = {
    "id": (str, None),
    "index": (int, (0, 2**64 - 1)),  # uint
    "count": (int, INT32),
    "devmem": (int, INT32),
    "devcore": (int, INT32),
    "type": (str, None),
    "numa": (int, (-(2**63), 2**63 - 1)),  # int
    "mode": (str, None),
    "health": (bool, None),
}


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def parse_register(value: str) -> tuple[RegisteredDevice, ...]:
    """The register annotation as its devices, as `UnMarshalNodeDevices` reads it: keys in any case, absent fields
    zero, other fields ignored; a field of another JSON type, or a number that is not whole or out of its Go type's
    range, is an error (as it is to Go's decoder)."""
    try:
        devices = json.loads(value, parse_constant=_not_json)
    except ValueError as error:
        raise AnnotationError(REGISTER, value, f"not JSON ({error})", REGISTER_FORMAT) from None
    if devices is None:  # Go decodes null as no devices
        return ()
    if not isinstance(devices, list):
        raise AnnotationError(REGISTER, value, "not a JSON list", REGISTER_FORMAT)
    found = []
    for position, device in enumerate(devices):
        if not isinstance(device, dict):
            raise AnnotationError(REGISTER, value, f"device {position} is not a JSON object", REGISTER_FORMAT)
        fields = {str(name).lower(): field for name, field in device.items()}  # the last of a key wins, as in Go
        problem = next(filter(None, (_field_problem(name, fields.get(name)) for name in _FIELDS)), None)
        if problem:
            raise AnnotationError(REGISTER, value, f"device {position}: {problem}", REGISTER_FORMAT)
        found.append(RegisteredDevice(**{name: fields[name] for name in _FIELDS if fields.get(name) is not None}))
    return tuple(found)


def _field_problem(name: str, field: Any) -> str | None:
    """What Go's decoder refuses in `field` for the DeviceInfo field `name`; None where it reads it (null: zero)."""
    kind, bounds = _FIELDS[name]
    if field is None:
        return None
    if kind is int and (isinstance(field, bool) or not isinstance(field, int)):
        return f"{name} {field!r} is not a whole number"
    if kind is not int and not isinstance(field, kind):
        return f"{name} {field!r} is not {'a string' if kind is str else 'true or false'}"
    if bounds is not None and not bounds[0] <= field <= bounds[1]:
        return f"{name} {field} is out of range"
    return None


def format_register(devices: Sequence[RegisteredDevice]) -> str:
    """The register annotation gpulab writes: compact JSON, every field of `RegisteredDevice` in HAMi's order and
    written even when zero (HAMi omits those; it reads both the same), so the value is byte-stable."""
    return json.dumps([{name: getattr(device, name) for name in _FIELDS} for device in devices], separators=(",", ":"))


# --- bind phase ---------------------------------------------------------------------------------------------------


def parse_bind_phase(value: str) -> str:
    """A pod's hami.io/bind-phase: one of BIND_PHASES."""
    if value not in BIND_PHASES:
        raise AnnotationError(BIND_PHASE, value, "no phase HAMi writes", " or ".join(BIND_PHASES))
    return value


# --- the node lock ------------------------------------------------------------------------------------------------
LOCK_FORMAT = "<RFC3339 time>,<namespace>,<pod> (or, from older HAMi, the time alone)"
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})"
)


@dataclass(frozen=True)
class NodeLock:
    """A node's hami.io/mutex.lock: when it was taken, and by which pod ("" and "" in the older form)."""

    taken: datetime
    namespace: str = ""
    pod: str = ""


def _rfc3339(text: str) -> datetime | None:
    """Go's `time.Parse(time.RFC3339, text)`: a fraction of a second is read though the layout has none."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    offset = timedelta(0)
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            return None
        offset = (1 if zone[0] == "+" else -1) * timedelta(hours=hours, minutes=minutes)
    try:
        return datetime(year, month, day, hour, minute, second, int(fraction[:6].ljust(6, "0")), timezone(offset))
    except ValueError:
        return None


def parse_node_lock(value: str) -> NodeLock:
    """The node lock as `ParseNodeLock` reads it: without a comma, the time alone; else exactly three parts."""
    parts = value.split(",") if "," in value else [value]
    if len(parts) not in (1, 3):
        raise AnnotationError(NODE_LOCK, value, f"{len(parts)} comma-separated parts", LOCK_FORMAT)
    taken = _rfc3339(parts[0])
    if taken is None:
        raise AnnotationError(NODE_LOCK, value, f"{parts[0]!r} is no RFC 3339 time", LOCK_FORMAT)
    return NodeLock(taken, *parts[1:])


def format_node_lock(taken: datetime, namespace: str, pod: str) -> str:
    """The lock HAMi's Bind writes for a pod (`GenerateNodeLockKeyByPod`: the time to the second, `Z` for UTC)."""
    if taken.tzinfo is None:
        raise ValueError("the lock's time needs a time zone")
    stamp = taken.replace(microsecond=0).isoformat()
    stamp = stamp[:-6] + "Z" if taken.utcoffset() == timedelta(0) else stamp
    return f"{stamp},{namespace},{pod}"


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An API object's annotations ({} where it has none)."""
    return (obj.get("metadata") or {}).get("annotations") or {}
