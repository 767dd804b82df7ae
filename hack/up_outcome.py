"""Run `pulumi up` (or the `pulumi stack select` before it) and, when it fails, end with one line that fits why.

`make up` used to end every failed `pulumi up` with "`make diagnose` tells why", also where nothing was deployed
(a policy refusal, printed 200 lines up) or the user stopped it. Here pulumi's output passes through unchanged, as
it comes (stdout to stdout, stderr to stderr), read for what the Pulumi CLI prints (v3.274.0,
pkg/backend/display): the Policies section's `- [mandatory]  <policy>  (<type>: <name>)` entries, each followed by
the policy's description and its message, two spaces deeper; "^C received; cancelling" and "received;
terminating"; "incorrect passphrase". On failure the last line names:
- each mandatory violation (policy, resource, reason), and no diagnose hint: the preview refused, nothing changed;
- an interruption: one Ctrl-C lets pulumi finish the steps it started and save the state, so `make up` again
  goes on from there; a second one stops it at once and may leave pending operations (docs/troubleshooting.md);
- a passphrase that is not the one the stack's secrets were made with;
- otherwise the diagnose hint (`make up`'s only line before).
The exit code is pulumi's (a pulumi killed by SIGINT: this process dies of SIGINT too, as a shell expects).
Writing to a pipe, pulumi shows the display it has for CI (a line per step, no colours), not its live tree.

Signals: the wrapper stays in pulumi's process group and never signals it. A terminal's Ctrl-C reaches every
process of the foreground group, pulumi included, and pulumi cancels on the first and terminates on the second:
sending it one more would turn a cancel into a termination. So INT and TERM are only counted here, and the
wrapper keeps reading until pulumi exits (dying first would break pulumi's pipe mid-cancel).

Temporary files: pulumi runs with TMPDIR set to a folder of its own (mode 0700), removed once pulumi has exited,
however it ended. Every plugin the engine starts inherits it, and the Kubernetes provider writes each provider's
kubeconfig, client key included, to `$TMPDIR/kubeconfigNNNN` for Helm on every Configure and never removes it
(pulumi-kubernetes provider/pkg/provider/provider.go Configure, util.go writeKubeconfigToFile). GPULAB_TMPDIR keeps
the folder the user had, for what must outlive the run (scripts/lib.sh's run records, a worker's join lock, process
mode's programs: process_lab/commands.py lasting). A folder left by a wrapper killed with KILL goes at the next run.

Standard library only (the Makefile runs it with the host's python3).
Usage: python3 -m hack.up_outcome [--setup | --passthrough] STACK PULUMI_ARGV...   (--setup: a step before the
update, e.g. `pulumi stack select --create`; only a passphrase mismatch gets a line there, the rest says itself what
failed. --passthrough: pulumi keeps the terminal, as `pulumi destroy` does, and nothing is added to its output.)
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from boundary.kube_client import remove_stale_private_dirs  # standard library only at import time
from model.stack_file import make_up  # standard library only

ROOT = Path(__file__).resolve().parents[1]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# pkg/backend/display/diff.go renderDiffPolicyViolationEvent, as printPolicies indents it.
MANDATORY = re.compile(
    r"^(?P<indent> *)- \[mandatory\](?: \[severity: [^\]]*\])?  (?P<policy>\S+)(?:  \((?P<type>\S+): (?P<name>.+)\))?$"
)
SEVERITY = re.compile(r"^(?:error|warning): ")  # a gpulab finding's own prefix (placement/findings.py)


@dataclass(frozen=True)
class Violation:
    policy: str
    resource: str  # "<type> <name>" as pulumi's rows print it, or "the stack"
    lines: tuple[str, ...]  # the policy's description, then its message

    @property
    def reason(self) -> str:
        message = self.lines[1:] or self.lines  # pulumi-policy puts the description first
        return SEVERITY.sub("", " ".join(line.strip() for line in message))


@dataclass
class Reading:
    """What one stream of pulumi's output said so far, fed line by line."""

    violations: list[Violation] = field(default_factory=list)
    cancelling: bool = False
    terminating: bool = False
    passphrase: bool = False
    _open: tuple[str, str, int] | None = None  # the violation being read: policy, resource, its lines' indent
    _lines: list[str] = field(default_factory=list)

    def feed(self, raw: str) -> None:
        line = ANSI.sub("", raw).rstrip("\r\n")
        if self._open is not None:
            indent = self._open[2]
            if line.startswith(" " * indent) and line.strip():  # pulumi indents every line of the message
                self._lines.append(line[indent:])
                return
            self._close()
        if match := MANDATORY.match(line):
            kind, name = match.group("type"), match.group("name")
            self._open = (match.group("policy"), f"{kind} {name}" if kind else "the stack", len(match["indent"]) + 2)
            return
        if "received; cancelling" in line:
            self.cancelling = True
        if "received; terminating" in line:
            self.terminating = True
        if "incorrect passphrase" in line.lower():
            self.passphrase = True

    def close(self) -> None:
        if self._open is not None:
            self._close()

    def _close(self) -> None:
        assert self._open is not None
        violation = Violation(self._open[0], self._open[1], tuple(self._lines))
        if violation not in self.violations:
            self.violations.append(violation)
        self._open, self._lines = None, []


def outcome(stack: str, readings: list[Reading], signals: int, setup: bool = False) -> list[str]:
    """The last lines of a failed step: a policy refusal, an interruption, a passphrase, else the diagnose hint."""
    again = f"run `{make_up(stack)}` again"
    if signals >= 2 or any(r.terminating for r in readings):
        return [
            "[gpulab] make up stopped at once (a second Ctrl-C): steps pulumi had started may be left pending in the "
            f"stack; {again}, and if it warns of pending operations see docs/troubleshooting.md (Interrupted)"
        ]
    if signals or any(r.cancelling for r in readings):
        return [f"[gpulab] make up interrupted: the stack is as far as it got; {again} to finish it"]
    if any(r.passphrase for r in readings):
        return [
            f"[gpulab] make up stopped: stack {stack}'s secrets were made with another passphrase than this one "
            "(pulumi: incorrect passphrase); set PULUMI_CONFIG_PASSPHRASE, or PULUMI_CONFIG_PASSPHRASE_FILE, to that "
            f"passphrase (make uses an empty one unless you set one), then {again}"
        ]
    if setup:
        return []
    violations = [v for reading in readings for v in reading.violations]
    if violations:
        return [f"[gpulab] make up refused by policy: {v.policy} on {v.resource}: {v.reason}" for v in violations]
    return [f"[gpulab] deploy failed: `make diagnose STACK={stack}` tells why (summary + reports/diagnose-*.tar.gz)"]


class Relay:
    """Copies a child's stdout and stderr to ours as they come, and reads each line."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None and child.stderr is not None
        self.streams = {child.stdout.fileno(): 1, child.stderr.fileno(): 2}  # child fd -> ours
        self.readings = {fd: Reading() for fd in self.streams}
        self.partial = {fd: b"" for fd in self.streams}
        self.closed: set[int] = set()  # ours that are gone (`make up | head`): keep draining pulumi's

    def pump(self, timeout: float | None) -> None:
        ready, _, _ = select.select(list(self.streams), [], [], timeout)
        for fd in ready:
            self._read(fd)

    def drain(self) -> None:
        """After the child exited: what is left in the pipes, without waiting on a grandchild that holds one."""
        for fd in list(self.streams):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
            while fd in self.streams and self._read(fd):
                pass
        for fd, reading in self.readings.items():
            if self.partial[fd]:
                reading.feed(self.partial[fd].decode(errors="replace"))
            reading.close()

    def _read(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not chunk:
            del self.streams[fd]
            return False
        self.write(self.streams[fd], chunk)
        *lines, self.partial[fd] = (self.partial[fd] + chunk).split(b"\n")
        for line in lines:
            self.readings[fd].feed(line.decode(errors="replace"))
        return True

    def write(self, ours: int, data: bytes) -> None:
        while data and ours not in self.closed:
            try:
                data = data[os.write(ours, data) :]
            except BrokenPipeError:
                self.closed.add(ours)
            except OSError as error:
                if error.errno != errno.EINTR:
                    self.closed.add(ours)

    @property
    def open(self) -> bool:
        return bool(self.streams)


PRIVATE_PREFIX = "gpulab-pulumi."


@contextmanager
def private_tmpdir() -> Iterator[dict[str, str]]:
    """The environment pulumi runs with: TMPDIR a new folder only this user may enter (mkdtemp: mode 0700), and
    GPULAB_TMPDIR the one before. The folder and whatever pulumi's plugins left in it are removed on the way out."""
    base = os.environ.get("GPULAB_TMPDIR") or tempfile.gettempdir()
    remove_stale_private_dirs(Path(base), PRIVATE_PREFIX)  # a wrapper killed with KILL left its folder
    folder = tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}.", dir=base)
    try:
        yield {"TMPDIR": folder, "GPULAB_TMPDIR": base}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(stack: str, argv: list[str], setup: bool = False, passthrough: bool = False) -> int:
    signals = 0

    def count(_signum: int, _frame: object) -> None:
        nonlocal signals
        signals += 1

    # HUP too (the terminal closed): pulumi gets it as well, and the wrapper must outlive pulumi to clean up.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored (a background job): pulumi inherits that
            signal.signal(signum, count)
    with private_tmpdir() as private:
        environment = {**os.environ, **private}
        pipe = None if passthrough else subprocess.PIPE
        try:
            child = subprocess.Popen(argv, stdout=pipe, stderr=pipe, env=environment)
        except OSError as error:
            print(f"[gpulab] cannot run {argv[0]}: {error.strerror}", file=sys.stderr)
            return 127
        if passthrough:
            code = child.wait()
            relay = None
        else:
            relay = Relay(child)
            while relay.open and child.poll() is None:
                relay.pump(0.5)  # bounded: a grandchild may hold the pipes after pulumi exits
            code = child.wait()
            relay.drain()
    if code == -signal.SIGINT:  # killed before its cancellation scope was set up (Go's default for INT)
        signals = max(signals, 1)
    if code != 0 and relay is not None:
        for line in outcome(stack, list(relay.readings.values()), signals, setup):
            relay.write(2, (line + "\n").encode())
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return 128 - code if code < 0 else code


def main(args: list[str]) -> int:
    setup = bool(args) and args[0] == "--setup"
    passthrough = bool(args) and args[0] == "--passthrough"
    args = args[1:] if setup or passthrough else args
    if len(args) < 2:
        print("usage: python3 -m hack.up_outcome [--setup | --passthrough] STACK PULUMI_ARGV...", file=sys.stderr)
        return 2
    return run(args[0], args[1:], setup, passthrough)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
