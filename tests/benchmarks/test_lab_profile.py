"""benchmarks/lab_profile.py: the per-step profile of `make up` and `make down`.

Boundary: the Pulumi engine's event log (`--event-log`) as the CLI writes it, one JSON EngineEvent a line with its
Unix second (sdk/go/common/apitype/events.go: `resourcePreEvent`, `resOutputsEvent`, `resOpFailedEvent`, each with
`metadata.op`, `.urn`, `.type`; previews mark theirs `planning`), and /proc/stat's `cpu` line as proc(5) gives it.
"""

from __future__ import annotations

from benchmarks import lab_profile

URN = "urn:pulumi:here::gpulab::{type}::{name}"


def event(stamp: int, kind: str, op: str, name: str, kind_type: str = "docker:index/container:Container", **more):
    urn = URN.format(type=kind_type, name=name)
    return {
        "sequence": stamp,
        "timestamp": stamp,
        kind: {"metadata": {"op": op, "urn": urn, "type": kind_type}, **more},
    }


def test_a_step_runs_from_its_pre_event_to_its_outputs_and_unchanged_or_planned_ones_are_left_out() -> None:
    events = [
        {"sequence": 0, "timestamp": 100, "preludeEvent": {"config": {}}},
        event(100, "resourcePreEvent", "create", "worker", planning=True),  # a preview's step: not run
        event(101, "resourcePreEvent", "create", "worker"),
        event(101, "resourcePreEvent", "same", "network"),
        event(101, "resOutputsEvent", "same", "network"),
        event(102, "resourcePreEvent", "replace", "hami", "kubernetes:helm.sh/v3:Release"),
        event(130, "resOutputsEvent", "create", "worker"),
        event(140, "resOpFailedEvent", "replace", "hami", "kubernetes:helm.sh/v3:Release"),
        {"sequence": 9, "timestamp": 141, "summaryEvent": {}},
    ]
    found = lab_profile.steps(events)
    assert [(s.name, s.op, s.start, s.seconds, s.failed) for s in found] == [
        ("docker:index/container:Container::worker", "create", 101, 29, False),
        ("kubernetes:helm.sh/v3:Release::hami", "replace", 102, 38, True),
    ]
    assert lab_profile.engine_span(events) == (100, 141)


def test_the_host_is_busy_but_for_idle_and_iowait() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    busy, every = lab_profile.host_jiffies("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n")
    assert (busy, every) == (160, 1000)
    samples = [(10.0, 0, 0), (11.0, 50, 100), (12.0, 150, 200), (20.0, 160, 1000)]
    assert lab_profile.busy_share(samples, 11, 12) == 1.0
    assert lab_profile.busy_share(samples, 10.5, 12) == 0.75  # from the sample before its start
    assert lab_profile.busy_share(samples, 30, 40) is None  # no samples: no figure, never a made-up one


def test_the_report_names_each_step_and_the_time_before_the_engine() -> None:
    events = [
        event(105, "resourcePreEvent", "create", "worker"),
        event(125, "resOutputsEvent", "create", "worker"),
    ]
    sampler = lab_profile.Sampler()
    sampler.host = [(100.0, 0, 0), (130.0, 30, 60)]
    text = lab_profile.report("make up STACK=here", 0, 100.0, 130.0, events, sampler)
    assert "Before the engine's first event: 5 s; the engine: 20 s; after its last event: 5 s." in text
    assert "| 0 | 20 | create | docker:index/container:Container::worker | 50% |" in text


def test_the_sampler_covers_the_whole_command_its_last_sample_taken_after_it_ended() -> None:
    sampler = lab_profile.Sampler()
    sampler.start()
    began = __import__("time").time()
    ended = __import__("time").time()
    sampler.stop.set()
    sampler.join(timeout=30)
    assert not sampler.is_alive()
    # A sample at or before the command's start and one at or after its end: busy_share can always bracket it.
    assert sampler.host[0][0] <= began and sampler.host[-1][0] >= ended
