"""What a process-mode lab left after `make down`: its node containers and lab network in the Docker engine, its
processes (any command line naming its state folder, zombies aside: they hold nothing) and its state folder.
One line per leftover; exit 1 if there is any. CI runs it after `make down STACK=...` (.ci/run).

Usage: python3 -m hack.lab_leftovers STACK   (from the project folder; .ci/run, with the host's python3)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from boundary.bounded_run import run_bounded
from model.names import OWNER_LABEL

ROOT = Path(__file__).resolve().parents[1]

DOCKER_TIMEOUT = 60  # seconds for one docker command: an engine that answers does in well under one


class EngineHung(Exception):
    """The engine did not answer: what the lab left cannot be told."""


def docker_lines(*args: str) -> list[str]:
    """What `docker ARGS` prints, a word a line; nothing where no engine runs (a process-mode lab may have none)."""
    try:
        answer = run_bounded(["docker", *args], DOCKER_TIMEOUT)
    except OSError:
        return []
    if answer.timed_out:
        raise EngineHung(f"`docker {' '.join(args)}` did not answer in {answer.waited:g} s")
    return answer.stdout.decode().split() if answer.ok else []


def owned(kind: str, ids: list[str], folder: Path) -> list[str]:
    found = []
    for item in ids:
        answer = run_bounded(["docker", kind, "inspect", item], DOCKER_TIMEOUT)
        if answer.timed_out:
            raise EngineHung(f"`docker {kind} inspect {item}` did not answer in {answer.waited:g} s")
        if answer.returncode != 0:
            continue
        document = json.loads(answer.stdout)[0]
        labels = (document.get("Config") or {}).get("Labels") or document.get("Labels") or {}
        if str(labels.get(OWNER_LABEL, "")).startswith(str(folder)):
            found.append(f"{kind} {document.get('Name', item).lstrip('/')}")
    return found


def processes(folder: Path) -> list[str]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if str(folder) in cmdline and "\tZ" not in state and proc.name != str(Path("/proc/self").resolve().name):
            found.append(f"process {proc.name}: {cmdline[:160]}")
    return found


def leftovers(stack: str) -> list[str]:
    folder = ROOT / ".state" / "process" / stack
    try:
        found = owned("container", docker_lines("ps", "-aq"), folder)
        found += owned("network", docker_lines("network", "ls", "-q"), folder)
    except EngineHung as hung:
        found = [f"the Docker engine: {hung}, so its containers and networks are not checked"]
    found += processes(folder)
    if folder.exists():
        found.append(f"folder {folder}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    found = leftovers(argv[0])
    for line in found:
        print(f"[gpulab] left after make down: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
