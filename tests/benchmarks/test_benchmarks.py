"""The benchmarks (`make bench`) still run: each at a tiny size, so they cannot rot unnoticed. The scheduling
benchmark (`make bench-scheduling`) needs real programs: its rows, settings and report are tested here offline,
each test naming the boundary it stands for."""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys

import pytest
import yaml
from cel_harness import admitted, run_policy
from shared_data import ROOT

from benchmarks import policy_check, program_under_mocks
from benchmarks.hami_scheduling import claim_template, dra_objects, gpu_nodes, pods
from benchmarks.scheduling_rows import (
    SETTINGS,
    UNTHROTTLED_CLIENT,
    Result,
    Row,
    ceiling_scheduler_config,
    dra_scheduler_config,
    header,
    parse_rows,
    summary,
    table,
    unready_nodes,
    watched_binding,
)
from model.config.loading import load_stack_file
from model.kube_objects.admission_policy import DENY_POLICY
from process_lab.control_plane import kwokctl_configuration
from process_lab.tenant import TenantLab


def test_program_benchmark_runs(capsys) -> None:
    program_under_mocks.main(sizes=(3,))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["tenants", "resources", "seconds", "ms/tenant"]
    assert lines[1].split()[0] == "3"


@pytest.mark.integration
def test_policy_benchmark_runs(capsys) -> None:
    policy_check.main(tenants=2, pods=40, adversarial=3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("40 pods across 2 tenants:")
    assert lines[1].startswith(f"  baseline {policy_check.BASELINE}:") and "x faster" in lines[1], lines[1]
    assert lines[1].split(",")[1].split(";")[0].strip() == lines[0].rsplit(",", 1)[1].strip(), "same error count"
    assert lines[2].startswith("3 adversarial small cases: slowest call")
    assert lines[3].startswith("40 pods across 2 tenants x 4 GPU nodes x 8 cards:") and "ratio" in lines[3], lines[3]
    assert "), 0 errors; one node of 32 cards:" in lines[3] and lines[3].count(", 0 errors") == 2, lines[3]
    assert lines[4].startswith("3 adversarial small multi-node cases: slowest call")


def test_image_pull_benchmark_runs(capsys) -> None:
    from benchmarks import image_pulls

    image_pulls.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["tenants", "naive", "pulls"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == ["2", "10", "50"]
    assert len({row[3] for row in rows}) == 1, "pre-loaded pulls do not grow with tenants"
    assert int(rows[0][4]) < 10, "the reference lab stays under Docker Hub's anonymous hourly limit"


def fake_proc(root, processes: dict[int, tuple[list[str], int, int]]):
    """A /proc of the given processes (argv, VmRSS kB, Pss kB), in the layout proc(5) gives."""
    root.mkdir()
    for pid, (argv, rss, pss) in processes.items():
        entry = root / str(pid)
        entry.mkdir()
        (entry / "cmdline").write_bytes(b"\0".join(word.encode() for word in argv) + b"\0")
        (entry / "status").write_text(f"Name:\tx\nVmHWM:\t{rss + 5} kB\nVmRSS:\t{rss} kB\n")
        (entry / "smaps_rollup").write_text(f"00400000-ff [rollup]\nRss:\t{rss} kB\nPss:\t{pss} kB\nPss_Anon:\t1 kB\n")
    (root / "self").mkdir()
    return root


def test_memory_is_summed_per_program_of_the_tenant_and_nothing_else(tmp_path) -> None:
    from benchmarks import memory

    folder = tmp_path / "lab" / "t0"
    proc = fake_proc(
        tmp_path / "proc",
        {
            10: (["/bin/etcd", f"--data-dir={folder}/etcd"], 50_000, 40_000),
            11: (["/bin/kube-apiserver", "--etcd-servers", "x", "--cert-dir", f"{folder}/pki"], 300_000, 200_000),
            12: (["/usr/bin/python3", "-m", "process_lab.device_plugin", "t0", "/bin", str(folder)], 30_000, 20_000),
            13: (["/bin/kube-apiserver", "--cert-dir", f"{tmp_path}/lab/t1/pki"], 300_000, 200_000),  # another tenant
            14: (["/bin/etcd", f"--data-dir={tmp_path}/lab/t00/etcd"], 50_000, 40_000),  # t00 is not t0
        },
    )
    usage = memory.by_program(folder, proc)
    assert usage == {
        "bind-time role": memory.Usage(30_000, 20_000),
        "etcd": memory.Usage(50_000, 40_000),
        "kube-apiserver": memory.Usage(300_000, 200_000),
    }
    lines = memory.table([usage])
    assert lines[-1].split() == ["per", "tenant", "371", "254"]
    assert memory.available_kb("MemTotal: 10 kB\nMemFree: 5 kB\nMemAvailable: 7 kB\n") == 7


# --- the scheduling benchmark (benchmarks/hami_scheduling.py): its pure parts, offline --------------------------


def result(row: Row, setting: str, bound: int, seconds: float) -> Result:
    return Result(row, setting, "flags", bound, seconds, 1.0, "2026-12-03 10:00:00 UTC")


def test_the_goal_rows_and_rows_written_out_parse_and_a_bad_row_is_refused_naming_the_form() -> None:

    issue = parse_rows(["goal"])
    assert [(r.nodes, r.pods, r.policy) for r in issue] == [
        (100, 1000, "spread"),
        (10, 100, "binpack"),
        (10, 100, "spread"),
        (100, 100, "spread"),
        (1000, 100, "spread"),
    ]
    assert [r.goal for r in issue[:2]] == [17, 5], "the issue's goals: 1,000 pods under 60 s; 5 pods/s binpack"
    assert parse_rows(["2x10", "10x100:binpack"]) == [Row(2, 10, "spread"), Row(10, 100, "binpack")]
    for bad in ("100x", "0x10", "10x10:random", "issue40", "goals"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"NODESxPODS\[:spread\|binpack\] or one of: goal"):
            parse_rows([bad])


def test_each_hami_row_is_divided_by_the_ceiling_of_its_own_row_and_judged_against_its_goal() -> None:

    spread, binpack = Row(100, 1000, "spread", goal=17), Row(10, 100, "binpack", goal=5)
    results = [
        result(spread, "chart", 450, 900.0),  # cut at the deadline: 0.5 pods/s
        result(spread, "lab", 1000, 50.0),  # 20 pods/s
        result(spread, "ceiling", 1000, 20.0),  # 50 pods/s
        result(binpack, "lab", 100, 25.0),  # 4 pods/s; no ceiling measured on this row
    ]
    checker = "checker 1.0 ms (0 refused)"
    assert summary(spread, results, checker) == (
        "100 nodes, 1000 pods, spread: HAMi or DRA / ceiling (50.0 pods/s): chart 0.01, lab 0.40; "
        "goal: chart not met (>= 17), lab met (>= 17); checker 1.0 ms (0 refused)"
    )
    assert summary(binpack, results, checker) == (
        "10 nodes, 100 pods, binpack: goal: lab not met (>= 5); checker 1.0 ms (0 refused)"
    )
    rows = table(results)
    assert rows[0].split("|")[1:-1] == [
        f" {h} "
        for h in ("nodes", "pods", "node policy", "setting", "bound", "time", "pods/s", "HAMi or DRA / ceiling", "goal")
    ]
    assert rows[2:] == [
        "| 100 | 1000 | spread | chart | 450/1000 | 900.0 s | 0.5 | 0.01 | not met (>= 17) |",
        "| 100 | 1000 | spread | lab | 1000/1000 | 50.0 s | 20.0 | 0.40 | met (>= 17) |",
        "| 100 | 1000 | spread | ceiling | 1000/1000 | 20.0 s | 50.0 |  |  |",
        "| 10 | 100 | binpack | lab | 100/100 | 25.0 s | 4.0 |  | not met (>= 5) |",
    ]


def test_the_ceilings_scheduler_config_is_one_kwokctl_takes_and_scores_gpus_as_the_node_policy() -> None:
    """Boundary: kwokctl v0.8.0 refuses a scheduler config of another apiVersion or kind
    (pkg/kwokctl/runtime/scheduler.go); kube-scheduler's NodeResourcesFit reads scoringStrategy (v1 args)."""

    for policy, strategy in (("spread", "LeastAllocated"), ("binpack", "MostAllocated")):
        config = yaml.safe_load(ceiling_scheduler_config(policy, SETTINGS["ceiling"].client))
        assert (config["apiVersion"], config["kind"]) == (
            "kubescheduler.config.k8s.io/v1",
            "KubeSchedulerConfiguration",
        )
        assert config["clientConnection"] == {"qps": 50, "burst": 100}, "kube-scheduler's own defaults, written out"
        [profile] = config["profiles"]
        assert profile["schedulerName"] == "default-scheduler"
        [fit] = profile["pluginConfig"]
        assert fit["name"] == "NodeResourcesFit"
        assert fit["args"]["scoringStrategy"] == {
            "type": strategy,
            "resources": [{"name": "nvidia.com/gpu", "weight": 1}],
        }
    unthrottled = yaml.safe_load(ceiling_scheduler_config("spread", SETTINGS["ceiling-unthrottled"].client))
    assert unthrottled["clientConnection"] == {"qps": 5000, "burst": 10000}


def test_only_ready_untainted_nodes_with_gpus_are_waited_for_before_the_clock_starts() -> None:
    """Boundary: Nodes as the API server lists them: KWOK sets Ready, the node lifecycle controller taints a node
    not ready until then."""

    def node(name: str, ready: str | None, taints: list | None = None, gpus: str | None = "80") -> dict:
        status: dict = {"allocatable": {"nvidia.com/gpu": gpus} if gpus else {}}
        if ready:
            status["conditions"] = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
        return {"metadata": {"name": name}, "spec": {"taints": taints} if taints else {}, "status": status}

    not_ready = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    items = [
        node("just-created", None),
        node("tainted", "True", not_ready),
        node("unknown", "Unknown"),
        node("no-gpus", "True", gpus=None),
        node("ready", "True"),
    ]
    assert unready_nodes(items) == ["just-created", "tainted", "unknown", "no-gpus"]


def test_the_pod_watch_reads_a_binding_only_once_the_node_is_set() -> None:
    """Boundary: `kubectl get --raw` of a pods watch prints the API server's WatchEvents, one JSON object a line."""

    added = '{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"p-1"},"spec":{"containers":[]}}}\n'
    bound = '{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"p-1"},"spec":{"nodeName":"bench-n7"}}}\n'
    gone = '{"type":"DELETED","object":{"kind":"Pod","metadata":{"name":"p-1"},"spec":{"nodeName":"bench-n7"}}}\n'
    assert watched_binding(added) == ("p-1", None)
    assert watched_binding(bound) == ("p-1", "bench-n7")
    assert watched_binding(gone) is None
    assert watched_binding("\n") is None


def test_a_runs_header_names_its_date_machine_command_and_programs(tmp_path) -> None:

    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\n")
    (tmp_path / "meminfo").write_text("MemTotal:       24576000 kB\nMemFree:  1 kB\n")
    lines = header("venv/bin/python -m benchmarks.hami_scheduling --rows issue41", "kube-scheduler v1.36.4", tmp_path)
    assert re.fullmatch(r"# date: \d{4}-\d\d-\d\d \d\d:\d\d UTC", lines[0]), lines[0]
    cpus = len(os.sched_getaffinity(0))
    assert lines[1] == f"# machine: {cpus} CPUs (AMD EPYC 7B13), 23.4 GiB, {platform.system()} {platform.release()}"
    assert lines[2:] == [
        "# command: venv/bin/python -m benchmarks.hami_scheduling --rows issue41",
        "# programs: kube-scheduler v1.36.4",
    ]


def test_a_tenant_without_hami_admits_the_ceilings_gpu_pods_and_starts_kube_scheduler_with_its_config(tmp_path) -> None:
    """Boundary: the tenant's API server (its deny policy judged by tests/support/cel_harness.py, which tests/real
    compares with the real one) and kwokctl (the scheduler configuration it is started with)."""

    class RecordingPlane:
        def __init__(self) -> None:
            self.created: list = []
            self.applied: list[dict] = []

        def create(self, scheduler_config=None) -> None:
            self.created.append(scheduler_config)

        def apply(self, objects: list[dict]) -> None:
            self.applied += objects

        def kubectl(self, *args: str, **_) -> subprocess.CompletedProcess:
            return subprocess.CompletedProcess(args, 0, "", "")

    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    config = tmp_path / "kube-scheduler.yaml"
    tenant = TenantLab(lab.tenants[0], lab, tmp_path / "bin", tmp_path / "lab", None, config)
    plane = tenant.control_plane = RecordingPlane()  # type: ignore[assignment]
    tenant.up()
    assert plane.created == [config]
    deny = next(
        o for o in plane.applied if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == DENY_POLICY
    )
    [pod] = pods(1, "default-scheduler")
    outcome = run_policy(deny, admitted(pod, webhook=False))
    assert outcome.matched and outcome.failed == [], outcome


def test_the_many_tenants_stack_passes_the_stacks_own_validation(tmp_path):
    """Boundary: gpulab's config validation (model/config), the same `make up` runs first: the written stack of
    20 tenants loads, every range its own, so `make up STACK=many` is refused for nothing but a real lack."""
    from benchmarks import many_tenants_stack

    path = tmp_path / "Pulumi.many.yaml"
    path.write_text(many_tenants_stack.stack_file(20))
    lab = load_stack_file(path)
    assert lab.runtime == "process"
    assert [tenant.name for tenant in lab.tenants] == [f"tenant-{i:02d}" for i in range(20)]
    assert len({str(tenant.pod_cidr) for tenant in lab.tenants} | {str(t.service_cidr) for t in lab.tenants}) == 40


@pytest.mark.integration
def test_the_many_tenants_stack_never_overwrites_a_stack_it_did_not_write():
    """Boundary: the user's own stack files beside it: asked for the name of a committed stack, it refuses."""
    before = (ROOT / "Pulumi.sim.yaml").read_text()
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "many_tenants_stack.py"), "3", "--stack", "sim"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Pulumi.sim.yaml exists and was not written by this script" in result.stderr
    assert (ROOT / "Pulumi.sim.yaml").read_text() == before


def test_the_dra_setting_shares_the_same_cards_as_devices_and_is_divided_by_the_ceiling_without_a_goal() -> None:
    """The `dra` setting: kube-scheduler alone (no HAMi), the nodes without nvidia.com capacity, their cards in a
    ResourceSlice each (model/dra.py, what a gpuSharing: dra tenant gets), and every pod with its own claim from one
    template asking what the HAMi pods limit (1000 MB, 5 %)."""
    setting = SETTINGS["dra"]
    assert setting.scheduler_alone and not setting.ceiling and setting.dra
    # The client rate a DRA tenant's kube-scheduler (no configuration file) takes from kwokctl's disableQPSLimits.
    assert setting.client == UNTHROTTLED_CLIENT
    assert yaml.safe_load(kwokctl_configuration())["options"]["disableQPSLimits"] is True
    nodes = gpu_nodes(2, as_devices=True)
    assert all(n["status"]["allocatable"].get("nvidia.com/gpu", "0") == "0" for n in nodes)  # no card as capacity
    device_class, *slices = dra_objects(2)
    assert device_class["kind"] == "DeviceClass" and [s["spec"]["nodeName"] for s in slices] == ["bench-n0", "bench-n1"]
    assert len(slices[0]["spec"]["devices"]) == 8 and slices[0]["spec"]["devices"][0]["allowMultipleAllocations"]
    exactly = claim_template()["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["capacity"]["requests"] == {"memory": "1k", "cores": "5"}
    [pod] = pods(1, "default-scheduler", claims=True)
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "bench-gpu"}]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    # A DRA node is waited for without nvidia.com/gpu; a HAMi node still needs it.
    ready = {**nodes[0], "status": {**nodes[0]["status"], "conditions": [{"type": "Ready", "status": "True"}]}}
    assert unready_nodes([ready], gpus=False) == [] and unready_nodes([ready]) == ["bench-n0"]
    config = yaml.safe_load(dra_scheduler_config((50, 100)))
    assert config["leaderElection"] == {"leaderElect": False} and "profiles" not in config
    row = Row(10, 100, "spread", goal=5)
    results = [result(row, "ceiling", 100, 2.0), result(row, "dra", 100, 10.0)]
    assert table(results)[3] == "| 10 | 100 | spread | dra | 100/100 | 10.0 s | 10.0 | 0.20 |  |"


def test_the_dra_setting_runs_a_tenant_without_hami_with_its_scheduler_config_and_claims(monkeypatch, tmp_path) -> None:
    """run_one for `dra`: the tenant is made without HAMi, kube-scheduler is started with the DRA configuration, and
    the measurement is asked for claim pods on nodes whose cards are slices (not HAMi's pods)."""
    from benchmarks import hami_scheduling

    made: dict = {}

    class Lab:
        hami = None

        def __init__(self, tenant, lab, tools, folder, hami_binary, config) -> None:
            made.update(hami_binary=hami_binary, config=config.read_text() if config else None)

        def up(self) -> None: ...

        def down(self) -> None: ...

    def measure(lab, row, scheduler, deadline, claims=False):
        made.update(scheduler=scheduler, claims=claims)
        return 1.0, row.pods, 0.5, {}

    monkeypatch.setattr(hami_scheduling, "TenantLab", Lab)
    monkeypatch.setattr(hami_scheduling, "measure", measure)
    lab_config = load_stack_file(ROOT / "Pulumi.dev.yaml")
    result = hami_scheduling.run_one(lab_config, Row(2, 4, "spread"), "dra", tmp_path, tmp_path / "hami", 60)
    assert made == {
        "hami_binary": None,
        "config": dra_scheduler_config(UNTHROTTLED_CLIENT),
        "scheduler": "default-scheduler",
        "claims": True,
    }
    assert result.bound == 4 and "DRA's allocator" in result.flags
    hami_scheduling.run_one(lab_config, Row(2, 4, "spread"), "lab", tmp_path, tmp_path / "hami", 60)
    assert made["claims"] is False and made["hami_binary"] == tmp_path / "hami"
