"""hami/annotations.py reads HAMi's annotations as HAMi v2.8.3 and v2.10.0 read them, and refuses, in one line that
names the annotation, the value and what was expected, what HAMi never writes; hami/usage.py counts a pod's cards
as each release's scheduler does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from hami.annotations import (
    ALLOCATED,
    NODE_LOCK,
    REGISTER,
    SHOWN,
    SUCCESS,
    TO_ALLOCATE,
    AnnotationError,
    CardShare,
    NodeLock,
    RegisteredDevice,
    format_allocation,
    format_node_lock,
    format_register,
    parse_allocation,
    parse_bind_phase,
    parse_node_lock,
    parse_register,
    pod_allocation,
)
from hami.releases import V2_8_3, V2_10_0
from hami.usage import PodUse, pod_use, read_allocation

# --- hami.io/vgpu-devices-allocated (devices.go EncodePodSingleDevice / DecodePodDevices) ---------------------------


def share(card: str, memory: int, cores: int) -> CardShare:
    return CardShare(card, "NVIDIA", memory, cores)


@pytest.mark.parametrize(
    "value, containers",
    [
        ("GPU-0,NVIDIA,20000,30:;", ((share("GPU-0", 20000, 30),), ())),  # one container, one card
        ("GPU-A,NVIDIA,1,40:GPU-B,NVIDIA,1,40:;", ((share("GPU-A", 1, 40), share("GPU-B", 1, 40)), ())),
        ("GPU-A,NVIDIA,100,10:;GPU-A,NVIDIA,200,20:;", ((share("GPU-A", 100, 10),), (share("GPU-A", 200, 20),), ())),
        # v2.10.0 keeps a container without cards (an init container's, here): positions are containers'
        (";GPU-A,NVIDIA,100,10:;", ((), (share("GPU-A", 100, 10),), ())),
        ("", ((),)),
    ],
)
def test_the_allocation_is_read_per_container_in_its_order(value: str, containers: tuple) -> None:
    assert parse_allocation(value) == containers
    assert format_allocation(containers[:-1]) == value  # HAMi ends each container with ";"


def test_an_entry_is_read_as_hami_reads_it() -> None:
    """DecodeContainerDevices: fewer than four fields is an error, more are read; numbers as strconv.ParseInt(_, 10,
    32) reads them (a sign, ASCII digits, int32), which v2.10.0 requires and gpulab requires of both releases."""
    assert parse_allocation("GPU-0,NVIDIA,100,+10,more:;")[0] == (share("GPU-0", 100, 10),)
    assert parse_allocation(f"GPU-0,NVIDIA,{2**31 - 1},0:;")[0] == (share("GPU-0", 2**31 - 1, 0),)
    for entry in ("GPU-0,NVIDIA,100", "GPU-0", "GPU-0,NVIDIA,1_000,10", "GPU-0,NVIDIA, 100,10", f"G,NVIDIA,{2**31},1"):
        with pytest.raises(AnnotationError, match=f"^{ALLOCATED} "):
            parse_allocation(f"{entry}:;")


def test_an_error_names_the_annotation_the_value_cut_short_and_what_was_expected() -> None:
    value = "GPU-0,NVIDIA,lots,10:;" * 20
    with pytest.raises(AnnotationError) as raised:
        parse_allocation(value, TO_ALLOCATE)
    text = str(raised.value)
    assert text.startswith(f"{TO_ALLOCATE} {value[:SHOWN]!r}... ({len(value)} characters): ")
    assert "entry 'GPU-0,NVIDIA,lots,10' has a non-numeric MB or cores; expected `UUID,TYPE,MB,CORES:`" in text
    assert "\n" not in text and len(text) < 300
    assert (raised.value.key, raised.value.value) == (TO_ALLOCATE, value)


def test_v2_10_0_lists_init_containers_first_and_v2_8_3_app_containers_only() -> None:
    value = "GPU-0,NVIDIA,8000,20:;GPU-0,NVIDIA,2000,10:;"
    v2_10_0 = pod_allocation(value, init_containers=1, init_first=True)
    assert (v2_10_0.init, v2_10_0.app) == (((share("GPU-0", 8000, 20),),), ((share("GPU-0", 2000, 10),), ()))
    v2_8_3 = pod_allocation(value, init_containers=1, init_first=False)
    assert (v2_8_3.init, len(v2_8_3.app)) == ((), 3)
    assert v2_10_0.entries() == [(True, "GPU-0", 8000, 20), (False, "GPU-0", 2000, 10)]


def pod(init: int = 1, succeeded: bool | None = None) -> dict:
    found: dict = {"spec": {"initContainers": [{"name": f"i{n}"} for n in range(init)]}, "status": {}}
    if succeeded is not None:
        state = {"terminated": {"exitCode": 0 if succeeded else 1}}
        found["status"]["initContainerStatuses"] = [{"name": f"i{n}", "state": state} for n in range(init)]
    return found


def test_a_pod_is_counted_as_its_release_counts_it() -> None:
    """initContainer.go `CollapseInitContainerUsage` (v2.10.0): per card the larger of the init containers' peak and
    the app containers' sum, one slot at least; `AppContainersOnlyDeviceUsage` once every init container succeeded,
    where a restarted scheduler counts the peak again. v2.8.3 adds every entry."""
    value = "GPU-0,NVIDIA,3000,5:;GPU-0,NVIDIA,6000,40:;GPU-0,NVIDIA,2000,10:;"

    def use(rules, running: dict) -> PodUse:
        return pod_use(running, read_allocation(running, value, rules))

    assert use(V2_10_0, pod(init=2)) == PodUse({"GPU-0": (1, 6000, 40)})
    assert use(V2_10_0, pod(init=2, succeeded=False)) == PodUse({"GPU-0": (1, 6000, 40)})
    assert use(V2_10_0, pod(init=2, succeeded=True)) == PodUse({"GPU-0": (1, 2000, 10)}, {"GPU-0": (1, 6000, 40)})
    assert use(V2_8_3, pod(init=2)) == PodUse({"GPU-0": (3, 11000, 55)})


# --- hami.io/node-nvidia-register (devices.go DeviceInfo, MarshalNodeDevices / UnMarshalNodeDevices) ---------------
# What gpulab's HAMi device plugin writes at each release, field for field as HAMi's json.Marshal does
# (tools/gpulab-hami-plugin/register_test.go TestTheRegisterAnnotationIsHAMisEncoding): zero fields omitted, and
# v2.8.3's `devicepairscore` struct never omitted.
PLUGIN = {
    "v2.10.0": '[{"id":"GPU-MOCK-tenant-b-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB",'
    '"mode":"hami-core","health":true},{"id":"GPU-MOCK-tenant-b-1","index":1,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true}]',
    "v2.8.3": '[{"id":"GPU-MOCK-tenant-b-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB",'
    '"mode":"hami-core","health":true,"devicepairscore":{}},{"id":"GPU-MOCK-tenant-b-1","index":1,"count":10,'
    '"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true,'
    '"devicepairscore":{}}]',
}


@pytest.mark.parametrize("version", sorted(PLUGIN))
def test_the_register_annotation_is_read_with_hamis_omitted_fields_as_zero(version: str) -> None:
    devices = parse_register(PLUGIN[version])
    assert devices == tuple(
        RegisteredDevice(f"GPU-MOCK-tenant-b-{i}", i, 10, 81920, 100, "NVIDIA-A100-SXM4-80GB", 0, "hami-core", True)
        for i in range(2)
    )
    # gpulab's own annotation (model/catalog.py) writes the zero fields too: it reads the same.
    assert parse_register(format_register(devices)) == devices


def test_the_register_annotation_is_read_as_gos_decoder_reads_it() -> None:
    """Keys in any case, unknown fields ignored, null as no value (or no devices)."""
    assert parse_register('[{"ID":"GPU-0","DevMem":1,"numa":null,"migProfiles":[]}]') == (
        RegisteredDevice("GPU-0", devmem=1),
    )
    assert parse_register("null") == ()
    for bad in (
        "GPU-0,10,81920,100,NVIDIA,0,true:",  # the text of DecodeNodeDevices, which GetNodeDevices does not read
        '{"id":"GPU-0"}',
        "[null]",
        '[{"count":10.5}]',
        '[{"count":"10"}]',
        '[{"count":true}]',
        f'[{{"devmem":{2**31}}}]',
        '[{"index":-1}]',
        '[{"health":"yes"}]',
        '[{"devmem":NaN}]',
    ):
        with pytest.raises(AnnotationError, match=f"^{REGISTER} "):
            parse_register(bad)


# --- hami.io/bind-phase and hami.io/mutex.lock ----------------------------------------------------------------------


def test_the_bind_phase_is_one_hami_writes() -> None:
    assert parse_bind_phase("success") == SUCCESS
    with pytest.raises(AnnotationError, match="expected allocating or success or failed"):
        parse_bind_phase("done")


def test_the_node_lock_is_read_in_both_forms() -> None:
    """nodelock.go `ParseNodeLock`: `<RFC3339>,<ns>,<pod>` (`GenerateNodeLockKeyByPod`), or the time alone."""
    taken = datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)
    assert parse_node_lock("2026-11-30T01:02:03Z,gpu-workloads,trainer-4") == NodeLock(
        taken, "gpu-workloads", "trainer-4"
    )
    assert parse_node_lock("2026-11-30T02:02:03+01:00") == NodeLock(taken)
    assert parse_node_lock("2026-11-30T01:02:03.5Z").taken == taken + timedelta(milliseconds=500)
    for bad in ("2026-11-30T01:02:03Z,gpu-workloads", "2026-11-30T01:02:03Z,a,b,c", "2026-11-30 01:02:03Z", "", "x"):
        with pytest.raises(AnnotationError, match=f"^{NODE_LOCK} "):
            parse_node_lock(bad)


def test_the_node_lock_is_written_as_hamis_bind_writes_it() -> None:
    taken = datetime(2026, 11, 30, 1, 2, 3, 999, tzinfo=UTC)
    assert format_node_lock(taken, "ns", "p") == "2026-11-30T01:02:03Z,ns,p"
    east = taken.astimezone(timezone(timedelta(hours=9)))
    assert format_node_lock(east, "ns", "p") == "2026-11-30T10:02:03+09:00,ns,p"
    assert parse_node_lock(format_node_lock(east, "ns", "p")) == NodeLock(taken.replace(microsecond=0), "ns", "p")
    with pytest.raises(ValueError, match="time zone"):
        format_node_lock(datetime(2026, 11, 30), "ns", "p")
