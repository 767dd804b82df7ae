"""Where `make up` and `make down` of the Docker lab spend their time and CPU, step by step.

Runs the command with EVENT_LOG and PULUMI_DEBUG_COMMANDS=true set (the Makefile passes the first to `pulumi up`
and `pulumi destroy` as `--event-log`, which the CLI has with the second: the engine's events, each with a Unix time
in whole seconds, pkg/apitype EngineEvent), and samples once a second the
host's CPU (/proc/stat: busy and all jiffies, proc(5)) and each Docker container's CPU (cgroup v1
cpuacct.usage under /sys/fs/cgroup/cpuacct/docker/ID, or cgroup v2 cpu.stat under /sys/fs/cgroup/system.slice/
docker-ID.scope: a kind node's kubelet, containerd and pods are inside it). Writes OUT/events.jsonl,
OUT/output.log (each line of the command with its second) and OUT/profile.md, and prints the profile:
the time before the engine's first event (make's checks, the venv, plugins), every resource step with its start,
duration and the host's CPU while it ran, the steps in flight over time, and CPU seconds per container.

Usage: venv/bin/python -m benchmarks.lab_profile --out reports/profile-up -- make up STACK=here
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from boundary.bounded_run import run_bounded

CGROUP_V1 = Path("/sys/fs/cgroup/cpuacct/docker")
CGROUP_V2 = Path("/sys/fs/cgroup/system.slice")


@dataclass(frozen=True)
class Step:
    name: str  # type::name of the resource
    op: str
    start: int
    end: int
    failed: bool = False

    @property
    def seconds(self) -> int:
        return self.end - self.start


def steps(events: list[dict]) -> list[Step]:
    """One step per resource the engine acted on (not `same`): from its first pre-event to its outputs or failure."""
    started: dict[str, tuple[str, int]] = {}
    done: list[Step] = []
    for event in events:
        stamp = int(event.get("timestamp", 0))
        for kind in ("resourcePreEvent", "resOutputsEvent", "resOpFailedEvent"):
            body = event.get(kind)
            if not body or body.get("planning"):
                continue
            meta = body.get("metadata") or {}
            urn, op = meta.get("urn", ""), meta.get("op", "")
            if op in ("same", "read") or not urn:
                continue
            if kind == "resourcePreEvent":
                started.setdefault(urn, (op, stamp))
            elif urn in started:
                first_op, begin = started.pop(urn)
                name = f"{meta.get('type', '')}::{urn.rsplit('::', 1)[-1]}"
                done.append(Step(name, first_op, begin, stamp, failed=kind == "resOpFailedEvent"))
    return sorted(done, key=lambda s: (s.start, -s.seconds))


def engine_span(events: list[dict]) -> tuple[int, int] | None:
    stamps = [int(e["timestamp"]) for e in events if e.get("timestamp")]
    return (min(stamps), max(stamps)) if stamps else None


def busy_share(samples: list[tuple[float, int, int]], start: float, end: float) -> float | None:
    """The host's busy share of its CPU between two Unix times, from (time, busy jiffies, all jiffies) samples: over
    the last sample at or before `start` and the first at or after `end`; None where the samples do not cover both."""
    before = [s for s in samples if s[0] <= start]
    after = [s for s in samples if s[0] >= end]
    if not before or not after or after[0][2] == before[-1][2]:
        return None
    return (after[0][1] - before[-1][1]) / (after[0][2] - before[-1][2])


def host_jiffies(stat: str) -> tuple[int, int]:
    """(busy, all) jiffies of /proc/stat's `cpu` line: idle and iowait are not busy."""
    fields = [int(v) for v in stat.splitlines()[0].split()[1:]]
    every = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return every - fields[3] - fields[4], every


def container_cpu() -> dict[str, float]:
    """CPU seconds of each running container, by full id."""
    usage: dict[str, float] = {}
    if CGROUP_V1.is_dir():
        for entry in CGROUP_V1.iterdir():
            try:
                usage[entry.name] = int((entry / "cpuacct.usage").read_text()) / 1e9
            except (OSError, ValueError):
                continue
    elif CGROUP_V2.is_dir():
        for entry in CGROUP_V2.glob("docker-*.scope"):
            try:
                stat = dict(line.split() for line in (entry / "cpu.stat").read_text().splitlines())
                usage[entry.name[len("docker-") : -len(".scope")]] = int(stat["usage_usec"]) / 1e6
            except (OSError, ValueError, KeyError):
                continue
    return usage


class Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.host: list[tuple[float, int, int]] = []
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.stop = threading.Event()

    def start(self) -> None:
        self.sample()  # one before the command starts, so its first second is covered
        super().start()

    def run(self) -> None:
        while True:
            if self.stop.wait(1.0):
                self.sample()  # one after the command's end, so its last second is covered
                return
            self.sample()

    def sample(self) -> None:
        busy, every = host_jiffies(Path("/proc/stat").read_text())
        self.host.append((time.time(), busy, every))
        for cid, seconds in container_cpu().items():
            self.first.setdefault(cid, seconds)
            self.last[cid] = seconds

    def per_container(self) -> dict[str, float]:
        return {cid: self.last[cid] - self.first[cid] for cid in self.last}


def container_names(ids: list[str]) -> dict[str, str]:
    """Names of the containers still there; a removed one keeps its short id."""
    names = {cid: cid[:12] for cid in ids}
    if ids:
        # Bounded as every docker call of the lab: a hung engine costs 30 s and leaves the short ids.
        answer = run_bounded(["docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Names}}"], 30)
        shown = answer.stdout.decode() if answer.ok else ""
        names.update(dict(line.split(" ", 1) for line in shown.splitlines() if " " in line and line[:64] in names))
    return names


def report(command: str, code: int, began: float, ended: float, events: list[dict], sampler: Sampler) -> str:
    lines = [f"# `{command}`: exit {code}, {ended - began:.0f} s", ""]
    span = engine_span(events)
    whole = busy_share(sampler.host, began, ended)
    if whole is not None:
        lines.append(f"Host CPU busy over the whole command: {whole:.0%} of {os.cpu_count()} CPUs.")
    if span:
        lines.append(
            f"Before the engine's first event: {span[0] - began:.0f} s; the engine: {span[1] - span[0]} s; "
            f"after its last event: {ended - span[1]:.0f} s."
        )
    found = steps(events)
    lines += ["", "| start (s) | seconds | op | resource | host CPU busy |", "| --- | --- | --- | --- | --- |"]
    base = span[0] if span else began
    for step in found:
        share = busy_share(sampler.host, step.start, step.end)
        busy = "" if share is None else f"{share:.0%}"
        op = f"{step.op} (failed)" if step.failed else step.op
        lines.append(f"| {step.start - base} | {step.seconds} | {op} | {step.name} | {busy} |")
    if found:
        lines += ["", "Steps in flight, by 10 s of the engine's run:", ""]
        end = max(s.end for s in found)
        for at in range(base, end + 1, 10):
            flight = [s for s in found if s.start <= at < max(s.end, s.start + 1)]
            lines.append(f"- {at - base:4d} s: {len(flight)} ({', '.join(s.name.rsplit('::', 1)[-1] for s in flight)})")
    spent = sorted(sampler.per_container().items(), key=lambda item: -item[1])
    if spent:
        names = container_names([cid for cid, _ in spent])
        lines += ["", "| container | CPU seconds |", "| --- | --- |"]
        lines += [f"| {names[cid]} | {seconds:.0f} |" for cid, seconds in spent if seconds >= 0.5]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a folder for events.jsonl, output.log, profile.md")
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    event_log = (args.out / "events.jsonl").resolve()
    event_log.unlink(missing_ok=True)
    sampler = Sampler()
    sampler.start()
    began = time.time()
    with (args.out / "output.log").open("w") as output:
        process = subprocess.Popen(
            args.command,
            # The CLI registers --event-log only with its debug commands on (pkg/cmd/pulumi/operations/up.go).
            env={**os.environ, "EVENT_LOG": str(event_log), "PULUMI_DEBUG_COMMANDS": "true"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            output.write(f"{time.time() - began:7.1f} {line}")
        code = process.wait()
    ended = time.time()
    sampler.stop.set()
    sampler.join()
    events = []
    if event_log.exists():
        events = [json.loads(line) for line in event_log.read_text().splitlines() if line.strip()]
    text = report(" ".join(args.command), code, began, ended, events, sampler)
    (args.out / "profile.md").write_text(text)
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
