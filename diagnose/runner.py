"""Bounded calls: every program diagnose runs gets a timeout, then TERM, then KILL to its whole
process group (boundary.bounded_run, the one bounded runner the process lab uses too), and the run as a
whole has a budget. Programs hang (an API server that accepts and never answers, an exec credential
plugin, `docker exec` into a wedged container) and some ignore TERM; kubectl's --request-timeout alone
bounds HTTP requests only, not an exec credential plugin."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from boundary import bounded_run

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
MAX_OUTPUT = 32 * 1024 * 1024  # a larger answer is cut: diagnose keeps what it reads in memory


@dataclass
class Result:
    argv: list[str]
    returncode: int | None  # None: did not finish (timed out, not found, skipped)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    problem: str = ""  # why there is no answer: "timed out after 10s", "kubectl not found", ...

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def why(self) -> str:
        """One line: what went wrong, or the last line of stderr."""
        if self.problem:
            return self.problem
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit code {self.returncode}"


def _unblock() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class Runner:
    """Runs programs, each for at most `timeout` seconds (then TERM, then KILL after `kill_after`),
    and none once `budget` seconds have passed since the runner was made."""

    def __init__(
        self,
        timeout: float = 20.0,
        kill_after: float = 5.0,
        budget: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.kill_after = kill_after
        self.clock = clock
        self.deadline = clock() + budget
        self.current: subprocess.Popen[bytes] | None = None

    def left(self) -> float:
        return self.deadline - self.clock()

    def run(self, argv: list[str], timeout: float | None = None) -> Result:
        limit = min(timeout or self.timeout, self.left())
        if limit <= 0:
            return Result(argv, None, problem="not run: diagnose's time budget is used up")
        program = shutil.which(argv[0])
        if program is None:
            return Result(argv, None, problem=f"{argv[0]} not found on PATH")
        started = self.clock()
        # Signals wait until `current` is set, so that abort() always knows the child to stop.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            # Own session: the timeout signals reach every process the program started.
            proc = bounded_run.start(
                [program, *argv[1:]],
                preexec_fn=_unblock,  # the child must see TERM: the mask is inherited across exec
            )
            self.current = proc
        except OSError as error:
            return Result(argv, None, problem=f"{argv[0]} could not start: {error.strerror}")
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        ended = bounded_run.finish(proc, limit, grace=self.kill_after)
        self.current = None
        return Result(
            argv,
            None if ended.timed_out else ended.returncode,
            ended.stdout[:MAX_OUTPUT].decode(errors="replace"),
            ended.stderr[:MAX_OUTPUT].decode(errors="replace"),
            self.clock() - started,
            f"no answer within {limit:.0f}s (stopped)" if ended.timed_out else "",
        )

    def abort(self) -> None:
        """Kill the running call with everything it started; for diagnose's own INT/TERM/HUP handler,
        before the private directory goes: a hung kubectl left behind would write into it afterwards."""
        proc = self.current
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.kill_after)
