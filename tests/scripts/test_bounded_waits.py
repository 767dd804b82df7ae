"""Every script ends by its deadline, even when kubectl hangs where --request-timeout does not reach (an exec
credential plugin waiting for a login) and ignores TERM: only KILL ends it. The fake kubectl
does exactly that under FAKE_KUBECTL_WEDGED=1."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from shared_data import ROOT

from tests.scripts.test_join_config import KUBECONFIG as JOIN_KUBECONFIG
from tests.scripts.test_scripts import FAKES, KUBECONFIG

# Short bounds so a test takes seconds: 1 s per call, 1 s from TERM to KILL, 1 s per attempt, 2 s per wait.
BOUNDS = {"GPULAB_CALL_TIMEOUT": "1", "GPULAB_KILL_AFTER": "1", "GPULAB_ATTEMPT_TIMEOUT": "1", "TIMEOUT": "2"}
WEDGED = "gpulab-fake-wedged-kubectl"


def wedged_processes(fake_dir: Path) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text.startswith(f"{WEDGED} {fake_dir}"):
            found.append(int(cmdline.parent.name))
    return found


@pytest.fixture
def fake_dir(tmp_path: Path):
    yield tmp_path
    for pid in wedged_processes(tmp_path):  # never leave one behind, even when a test fails
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def environment(fake_dir: Path, **env: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(fake_dir),
        "TMPDIR": str(fake_dir),
        "GPULAB_POLL_INTERVAL": "0.1",
        "FAKE_KUBECTL_WEDGED": "1",
        "PYTHONPATH": str(ROOT),
        "PYTHON": sys.executable,
        **BOUNDS,
        **env,
    }


def no_wedged_process_outlives(fake_dir: Path, seconds: float) -> None:
    """Each wedged kubectl ends within its own bound (call timeout + kill-after), never later."""
    deadline = time.monotonic() + seconds
    while wedged_processes(fake_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not wedged_processes(fake_dir), "a hung kubectl outlived every bound"


CASES = {
    "wait-tenant-api.sh": ({"TENANT": "t"}, 1),
    "wait-cert-manager.sh": ({}, 1),
    "wait-kamaji.sh": ({"PROBE_JSON": '{"apiVersion": "v1", "kind": "List", "items": []}'}, 1),
    "wait-metallb.sh": ({"PROBE_JSON": '{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool"}'}, 1),
    "wait-node-ready.sh": ({"NODE_NAMES": "n1", "TENANT": "t"}, 1),
    "wait-gpu-node.sh": ({"NODE_NAME": "n1", "EXPECT_JSON": "{}"}, 1),
    "check-real-gpus.sh": ({"NODE_NAME": "n1", "EXPECT_CARDS": "[]"}, 1),
    "apply-gpu-inventory.sh": ({"NODE_NAME": "n1", "REGISTER_JSON": "[]", "GPU_CAPACITY": "1"}, 1),
    "delete-token.sh": ({"TOKEN_ID": "abcdef", "TENANT": "t"}, 1),
    "join-config.sh": ({"NODE_NAME": "n1", "TENANT": "t"}, 1),
    "node-leave.sh": ({"NODE_NAME": "n1"}, 0),  # no answer: the tenant is gone, destroy goes on
}


@dataclass
class Run:
    fake_dir: Path
    process: subprocess.Popen
    started: float
    result: tuple[str, str] = ("", "")
    ended: float = 0.0


def _finish(run: Run, kubeconfig: str) -> None:
    try:
        run.result = run.process.communicate(kubeconfig, timeout=60)
    except subprocess.TimeoutExpired:  # the bound did not hold: the test fails on `ended`; end the script
        run.process.kill()
        run.process.communicate()
        return
    run.ended = time.monotonic()


@pytest.fixture(scope="module")
def wedged_runs(tmp_path_factory: pytest.TempPathFactory):
    """Every script of CASES against the wedged kubectl, all at once: each waits out its own bounds (wall
    time, not CPU), so together they take as long as the slowest. Each has its own fake folder and clock."""
    runs: dict[str, Run] = {}
    threads = []
    for script, (env, _) in sorted(CASES.items()):
        fake = tmp_path_factory.mktemp(script.removesuffix(".sh"))
        # join-config.sh pins the tenant's CA before its first kubectl: give it a kubeconfig with one.
        kubeconfig = JOIN_KUBECONFIG if script == "join-config.sh" else KUBECONFIG
        process = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(fake, **env),
            cwd=ROOT,
        )
        runs[script] = Run(fake, process, time.monotonic())
        threads.append(threading.Thread(target=_finish, args=(runs[script], kubeconfig)))
        threads[-1].start()
    for thread in threads:
        thread.join(timeout=90)
    yield runs
    for run in runs.values():  # never leave one behind, even when a test fails
        for pid in wedged_processes(run.fake_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.integration
@pytest.mark.parametrize("script", sorted(CASES))
def test_a_wedged_kubectl_cannot_hang_a_script(wedged_runs: dict[str, Run], script: str) -> None:
    _, expected = CASES[script]
    run = wedged_runs[script]
    assert run.ended, f"{script} still running after 90 s"
    elapsed = run.ended - run.started
    assert run.process.returncode == expected, run.result[1]
    # A wait of 2 s (TIMEOUT) with attempts of 1 s, each call bounded at 1 s + 1 s, against a kubectl wedged for
    # good: the bound is the script's promise with a margin a loaded 2-core machine keeps.
    assert elapsed < 45, f"{script} took {elapsed:.1f}s"
    no_wedged_process_outlives(run.fake_dir, 5)


@pytest.mark.integration
def test_a_wait_ends_on_time_when_one_probe_makes_several_hung_calls(fake_dir: Path) -> None:
    """wait-kamaji's and wait-gpu-node's probes make several calls each: the attempt, not each call, is
    what the deadline bounds."""
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "wait-gpu-node.sh")],
        input=KUBECONFIG,
        capture_output=True,
        text=True,
        env=environment(
            fake_dir,
            NODE_NAME="n1",
            EXPECT_JSON="{}",
            GPULAB_CALL_TIMEOUT="30",
            GPULAB_ATTEMPT_TIMEOUT="30",
            TIMEOUT="2",
        ),
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1 and "timed out after 2s" in result.stderr, result.stderr
    assert "gpu_node_ready did not finish within 2s; stopped it" in result.stderr
    assert elapsed < 25, f"the wait took {elapsed:.1f}s with 30 s per call"  # 2 s promised; a loaded machine's margin


@pytest.mark.integration
def test_term_during_a_hung_probe_ends_the_script_promptly(fake_dir: Path) -> None:
    """Pulumi cancelling (or Ctrl-C) sends TERM while a probe hangs: the script ends within the kill grace,
    removes its run directory, and the probe's process group goes with it."""
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "wait-tenant-api.sh")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(fake_dir, TENANT="t", TIMEOUT="300", GPULAB_ATTEMPT_TIMEOUT="300", GPULAB_CALL_TIMEOUT="2"),
        text=True,
        start_new_session=True,
    )
    process.stdin.write(KUBECONFIG)
    process.stdin.close()
    deadline = time.monotonic() + 10
    while not wedged_processes(fake_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wedged_processes(fake_dir), "the probe never started"
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=20)
    assert time.monotonic() - started < 15, "TERM waited for the hung probe"  # it hangs 300 s; 15 s: a loaded margin
    assert process.returncode == 143
    assert not list(fake_dir.glob("gpulab-run.*")), "TERM left the run directory behind"
    no_wedged_process_outlives(fake_dir, 2 + 1 + 2)


def _stdout_closes_within(process: subprocess.Popen, seconds: float) -> bool:
    """Reads the script's stdout until end of file, for at most SECONDS: True when every writer has closed it."""
    deadline = time.monotonic() + seconds
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], left)
        if readable and os.read(fd, 65536) == b"":
            return True
    return False


@pytest.mark.integration
@pytest.mark.parametrize(
    ("script", "env"),
    [
        ("wait-cert-manager.sh", {}),
        ("wait-kamaji.sh", {"PROBE_JSON": '{"apiVersion": "v1", "kind": "List", "items": []}'}),
        ("node-leave.sh", {"NODE_NAME": "n1"}),
    ],
)
def test_no_child_outlives_its_script(fake_dir: Path, script: str, env: dict[str, str]) -> None:
    """Boundary: coreutils `timeout` runs its program in a process group of its own (timeout.c calls
    setpgid(0, 0) unless --foreground), so killing an attempt's group missed the `timeout` inside kc; and a kubectl
    wedged in an exec credential plugin ignores TERM. With calls bounded at 60 s and a wait of 1 s, the script
    ends after its wait and the kill grace (1 s), and then nothing it started is left: its stdout is closed."""
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(fake_dir, TIMEOUT="1", GPULAB_CALL_TIMEOUT="60", GPULAB_ATTEMPT_TIMEOUT="60", **env),
    )
    process.stdin.write(KUBECONFIG.encode())
    process.stdin.close()
    started = time.monotonic()
    process.wait(timeout=30)
    # Wait 1 s and grace 1 s promised, against calls of 60 s: 20 s is the margin a loaded 2-core machine needs.
    assert time.monotonic() - started < 20, "the script overran its wait and kill grace"
    assert _stdout_closes_within(process, 5), f"a child of {script} still holds its stdout after it ended"
    assert not wedged_processes(fake_dir), f"a hung kubectl outlived {script}"
