"""hack/up_outcome.py: `make up`'s `pulumi up` with its output passed through and, on failure, a last line
that fits it.

Boundary: the Pulumi CLI as `make up` runs it, a stand-in on PATH (tests/fakes/pulumi-up) that prints what the
CLI prints and handles INT as its cancellation scope does; the terminal, as the sender of Ctrl-C to the whole
foreground process group.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from shared_data import ROOT

# As make runs it: a module, from the project folder (each call below passes cwd=ROOT).
WRAPPER = [sys.executable, "-m", "hack.up_outcome"]
FAKE = ROOT / "tests" / "fakes" / "pulumi-up"
UP = ["pulumi", "up", "--yes", "--stack", "sim", "--refresh", "--policy-pack", "policies/analyzer"]

# The Policies section as the CLI prints it without a terminal (colours off): pkg/backend/display/progress.go
# printPolicies and diff.go renderDiffPolicyViolationEvent, and the engine's own golden output of it
# (pkg/engine/lifecycletest/testdata/output/TestSimpleAnalyzeResourceFailure/progress.stdout.txt); pulumi-policy
# puts the policy's description before its message. The message is the one gpulab's pack gives for a fourth
# 30 % pod on tenant-a's A100 (`make plan`).
REFUSED = (
    "        - [mandatory]  gpu-request-limits  (kubernetes:core/v1:Pod: tenant-a-workloads-trainer-4)\n"
    "          GPU workloads must fit their tenant's cards, per-pod limits and quota, as HAMi would judge them.\n"
    "          error: tenant tenant-a: Pod/gpu-workloads/trainer-4 on GPU-MOCK-tenant-a-0: CardInsufficientCore: no "
    "placement fits it next to Pod/gpu-workloads/trainer-1, Pod/gpu-workloads/trainer-2, Pod/gpu-workloads/trainer-3"
    ": container gpu asks 20000 MB, 30% cores; GPU-MOCK-tenant-a-0 (NVIDIA-A100-SXM4-80GB): CardInsufficientCore "
    "(asks 30% cores, 10% free)\n"
)
POLICY_OUTPUT = (
    "Previewing update (sim):\n"
    "    pulumi:pulumi:Stack gpulab-sim  \n"
    "    kubernetes:core/v1:Pod tenant-a-workloads-trainer-4  \n"
    "Policies:\n"
    "    ❌ gpulab-gpu-policies@v0.1.0 (local: policies/analyzer)\n"
    + REFUSED
    + "        - [mandatory]  tenant-version-supported-by-kamaji\n"
    "          Tenant Kubernetes versions stay within what the pinned Kamaji accepts.\n"
    "          TenantControlPlane tenant-b asks Kubernetes v1.99.0; the pinned Kamaji accepts up to v1.36.x and its\n"
    "          webhook would reject it\n"
    "        - [advisory]  gpu-placement-order  (kubernetes:core/v1:Pod: tenant-b-workloads-infer-1)\n"
    "          GPU workloads that fit only in some creation orders or card policies.\n"
    "          warning: tenant tenant-b: ...\n"
    "\n"
)
CARD = (
    "tenant tenant-a: Pod/gpu-workloads/trainer-4 on GPU-MOCK-tenant-a-0: CardInsufficientCore: no placement fits it "
    "next to Pod/gpu-workloads/trainer-1, Pod/gpu-workloads/trainer-2, Pod/gpu-workloads/trainer-3: container gpu "
    "asks 20000 MB, 30% cores; GPU-MOCK-tenant-a-0 (NVIDIA-A100-SXM4-80GB): CardInsufficientCore (asks 30% cores, "
    "10% free)"
)
DIAGNOSE = "[gpulab] deploy failed: `make diagnose STACK=sim` tells why (summary + reports/diagnose-*.tar.gz)"
INTERRUPTED = "[gpulab] make up interrupted: the stack is as far as it got; run `make up STACK=sim` again to finish it"
PASSPHRASE = (
    "[gpulab] make up stopped: stack sim's secrets were made with another passphrase than this one (pulumi: "
    "incorrect passphrase); set PULUMI_CONFIG_PASSPHRASE, or PULUMI_CONFIG_PASSPHRASE_FILE, to that passphrase "
    "(make uses an empty one unless you set one), then run `make up STACK=sim` again"
)


def fake_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "pulumi").exists():
        (bin_dir / "pulumi").symlink_to(FAKE)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_DIR": str(tmp_path), **extra}


def up(tmp_path: Path, stdout: str = "", stderr: str = "", rc: int = 0, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "stdout").write_text(stdout)
    (tmp_path / "stderr").write_text(stderr)
    return subprocess.run(
        [*WRAPPER, *args, "sim", *UP],
        cwd=ROOT,
        env=fake_env(tmp_path, FAKE_PULUMI_RC=str(rc)),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.integration
def test_a_policy_refusal_is_named_last_with_no_diagnose_hint(tmp_path: Path) -> None:
    result = up(tmp_path, POLICY_OUTPUT, "error: preview failed\n", 1)
    assert result.returncode == 1
    assert result.stdout == POLICY_OUTPUT, "pulumi's output passes through unchanged"
    assert result.stderr.splitlines() == [
        "error: preview failed",
        f"[gpulab] make up refused by policy: gpu-request-limits on kubernetes:core/v1:Pod "
        f"tenant-a-workloads-trainer-4: {CARD}",
        "[gpulab] make up refused by policy: tenant-version-supported-by-kamaji on the stack: TenantControlPlane "
        "tenant-b asks Kubernetes v1.99.0; the pinned Kamaji accepts up to v1.36.x and its webhook would reject it",
    ]
    assert (tmp_path / "argv").read_text().split() == UP[1:], "pulumi got make's arguments as they were"


@pytest.mark.integration
def test_a_refusal_in_colour_or_with_a_severity_reads_the_same(tmp_path: Path) -> None:
    """`--color always`: colour codes where the golden output has its tags (around the level and the policy
    name, before the message); a policy with a severity gets `[severity: ...]` after its level."""
    coloured = REFUSED.replace(
        "[mandatory]  gpu-request-limits", "\x1b[31m[mandatory] [severity: high]  gpu-request-limits\x1b[0m"
    ).replace("          GPU workloads", "          \x1b[0mGPU workloads")
    result = up(tmp_path, coloured, "", 1)
    assert result.stderr.splitlines() == [
        f"[gpulab] make up refused by policy: gpu-request-limits on kubernetes:core/v1:Pod "
        f"tenant-a-workloads-trainer-4: {CARD}"
    ]


@pytest.mark.integration
def test_an_advisory_violation_alone_is_no_refusal(tmp_path: Path) -> None:
    advisory = POLICY_OUTPUT.split("        - [advisory]", 1)[1]
    result = up(tmp_path, "Policies:\n        - [advisory]" + advisory, "error: update failed\n", 1)
    assert result.stderr.splitlines() == ["error: update failed", DIAGNOSE]


@pytest.mark.integration
@pytest.mark.parametrize(
    "message",
    [
        "error: incorrect passphrase",  # a new stack whose file has another passphrase's encryptionsalt
        # an existing stack: the CLI's locked secrets manager (pkg/secrets/passphrase/manager.go)
        "error: failed to decrypt: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the correct "
        "passphrase or set PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase",
    ],
)
def test_a_wrong_passphrase_gets_its_own_line(tmp_path: Path, message: str) -> None:
    result = up(tmp_path, "", message + "\n", 1)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [message, PASSPHRASE]


@pytest.mark.integration
def test_before_the_update_only_a_wrong_passphrase_gets_a_line(tmp_path: Path) -> None:
    """`pulumi stack select --create` (make's `stack` step): nothing deployed yet, so no diagnose hint."""
    result = up(tmp_path, "", "error: incorrect passphrase\n", 255, "--setup")
    assert (result.returncode, result.stderr.splitlines()) == (255, ["error: incorrect passphrase", PASSPHRASE])
    other = up(tmp_path, "", "error: could not create stack\n", 255, "--setup")
    assert (other.returncode, other.stderr) == (255, "error: could not create stack\n")


@pytest.mark.integration
def test_any_other_failure_gets_the_diagnose_hint_and_keeps_pulumis_exit_code(tmp_path: Path) -> None:
    result = up(tmp_path, "Updating (sim):\n", "error: update failed\n", 4)
    assert (result.returncode, result.stdout) == (4, "Updating (sim):\n")
    assert result.stderr.splitlines() == ["error: update failed", DIAGNOSE]


@pytest.mark.integration
def test_a_success_adds_nothing(tmp_path: Path) -> None:
    done = "Updating (sim):\nResources:\n    41 unchanged\n"
    result = up(tmp_path, done, "")
    assert (result.returncode, result.stdout, result.stderr) == (0, done, "")


@pytest.mark.integration
def test_a_line_without_its_newline_still_passes(tmp_path: Path) -> None:
    result = up(tmp_path, "no newline at the end", "error: incorrect passphrase", 1)
    assert result.stdout == "no newline at the end"
    assert result.stderr == "error: incorrect passphrase" + PASSPHRASE + "\n"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30  # a bound, not a measurement
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.02)


def signals(tmp_path: Path) -> str:
    return (tmp_path / "signals").read_text() if (tmp_path / "signals").exists() else ""


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def sigint_as_a_terminal_gives_it() -> None:
    """A child's SIGINT at its default, as a terminal's foreground job has it: this suite may itself run where
    SIGINT is ignored (a background job of a shell without job control, nohup), which every child inherits
    (signal(7): an ignored signal stays ignored across exec), and then no Ctrl-C could reach the wrapper."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(tmp_path: Path, presses: int, **extra: str) -> tuple[subprocess.Popen, list[str]]:
    """The wrapper in a process group of its own, as `make up` in a terminal's foreground; Ctrl-C pressed
    `presses` times: SIGINT to the whole group, as the terminal sends it. Returns the wrapper and its stdout lines
    up to pulumi's answer to the last press.

    Two signals sent at once are one if the second comes before the first is handled, so a wrapper that sent
    pulumi one more would often pass unseen. Hence each press finds the wrapper stopped (SIGSTOP): pulumi takes
    the terminal's SIGINT first, and the wrapper handles its own only once continued."""
    (tmp_path / "stdout").write_text("Updating (sim):\n")
    wrapper = subprocess.Popen(
        [*WRAPPER, "sim", *UP],
        cwd=ROOT,
        env=fake_env(tmp_path, FAKE_PULUMI_CANCEL="1", FAKE_PULUMI_RC="8", **extra),  # 8: the CLI's ExitCancelled
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_a_terminal_gives_it,
    )
    assert wrapper.stdout is not None
    wait_until((tmp_path / "ready").exists, "the fake's trap")
    lines = [wrapper.stdout.readline()]
    for press in range(presses):
        os.kill(wrapper.pid, signal.SIGSTOP)
        wait_until(lambda: stopped(wrapper.pid), "the wrapper's stop")
        os.killpg(wrapper.pid, signal.SIGINT)
        wait_until(lambda: signals(tmp_path).count("INT") > press, "pulumi's SIGINT")  # noqa: B023 (called here)
        os.kill(wrapper.pid, signal.SIGCONT)
        # Seeing pulumi's answer relayed means the wrapper ran its own handler for this press already.
        answer = "^C received; terminating\n" if press else "Note that terminating immediately"
        while not lines[-1].startswith(answer):
            lines.append(wrapper.stdout.readline())
            assert lines[-1], lines
    return wrapper, lines


@pytest.mark.integration
def test_ctrl_c_reaches_pulumi_once_and_says_a_rerun_finishes(tmp_path: Path) -> None:
    wrapper, lines = interrupted(tmp_path, presses=1)
    (tmp_path / "finish").write_text("")  # pulumi has finished what it had started
    out, err = wrapper.communicate(timeout=60)
    assert signals(tmp_path) == "INT\n", "the terminal's one SIGINT, not doubled by the wrapper"
    assert lines[1] == "^C received; cancelling. If you would like to terminate immediately, press ^C again.\n"
    assert (wrapper.returncode, out, err) == (8, "", INTERRUPTED + "\n")


@pytest.mark.integration
def test_a_second_ctrl_c_says_what_may_be_left_pending(tmp_path: Path) -> None:
    wrapper, _ = interrupted(tmp_path, presses=2)
    _, err = wrapper.communicate(timeout=60)
    assert signals(tmp_path) == "INT\nINT\n"
    assert wrapper.returncode == 255
    assert err == (
        "[gpulab] make up stopped at once (a second Ctrl-C): steps pulumi had started may be left pending in the "
        "stack; run `make up STACK=sim` again, and if it warns of pending operations see docs/troubleshooting.md "
        "(Interrupted)\n"
    )


@pytest.mark.integration
def test_a_pulumi_killed_by_sigint_kills_the_wrapper_the_same_way(tmp_path: Path) -> None:
    """Before its cancellation scope exists the CLI dies of SIGINT (Go's default): the shell and make must see
    an interrupted child, not an exit code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/usr/bin/env bash\nkill -INT $$\n")
    (bin_dir / "pulumi").chmod(0o755)
    result = subprocess.run(
        [*WRAPPER, "dev", "pulumi", "up"],
        cwd=ROOT,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=sigint_as_a_terminal_gives_it,
    )
    assert result.returncode == -signal.SIGINT
    assert result.stderr == INTERRUPTED.replace("make up STACK=sim", "make up") + "\n"


@pytest.mark.integration
def test_make_up_runs_pulumi_through_it_with_make_s_options() -> None:
    env = {**os.environ, "MAKEFLAGS": "", "PULUMI_BACKEND_URL": "file:///nonexistent"}
    for stack, options in (("sim", " --refresh --policy-pack policies/analyzer"), ("dev", " --policy-pack policies")):
        plan = subprocess.run(
            ["make", "-n", "deploy", f"STACK={stack}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        ).stdout.splitlines()
        # With a source cache, the engine fetches no plugin (OFFLINE_ENV prefixes an `env` that says so).
        up = f"python3 -m hack.up_outcome {stack} pulumi up --yes --stack {stack}{options}"
        assert any(line.endswith(up) for line in plan), plan
        assert f"python3 -m hack.up_outcome --setup {stack} pulumi stack select --create {stack}" in plan, plan


# Temporary files: the Kubernetes provider's kubeconfig for Helm, written on every Configure and never removed


def make_pulumi_lines(target: str, stack: str) -> list[str]:
    """The commands `make TARGET STACK=stack` runs that start pulumi up, destroy or preview (whose engine starts the
    providers), as make would run them: `make -n`, with the steps before taken as done."""
    done = [arg for step in ("prereqs", "policy-venv", "stack", "process-tools") for arg in ("-o", step)]
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", *done, target, f"STACK={stack}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    return [
        line
        for line in lines
        if re.search(r"\bpulumi (up|destroy|preview)\b", line) and not line.startswith(("echo ", "#"))
    ]


def provider_folder(tmp_path: Path) -> tuple[Path, str, int]:
    """Where the provider-like child wrote its kubeconfig: the folder, its mode (octal digits) and owner."""
    path, mode, uid = (tmp_path / "provider-tmpdir").read_text().split()
    return Path(path), mode, int(uid)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("target", "stack"), [("deploy", "dev"), ("destroy", "dev"), ("deploy", "sim")], ids=["up", "destroy", "up sim"]
)
@pytest.mark.parametrize("rc", [0, 1], ids=["succeeds", "fails"])
def test_makes_pulumi_leaves_no_kubeconfig_behind(tmp_path: Path, target: str, stack: str, rc: int) -> None:
    """Boundary: the Pulumi engine and its plugins (a provider-like child of the fake CLI that writes
    `$TMPDIR/kubeconfigNNNN` as pulumi-kubernetes' Configure does), run by the very command line make runs."""
    [line] = make_pulumi_lines(target, stack)
    assert "-m hack.up_outcome" in line, f"make runs pulumi without its private TMPDIR: {line}"
    base = tmp_path / "tmp"
    base.mkdir()
    result = subprocess.run(
        ["bash", "-c", line],
        cwd=ROOT,
        env=fake_env(tmp_path, TMPDIR=str(base), FAKE_PROVIDER_KUBECONFIG="1", FAKE_PULUMI_RC=str(rc)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == rc, result.stderr
    folder, mode, uid = provider_folder(tmp_path)
    assert folder.parent == base and folder.name.startswith("gpulab-pulumi."), folder
    assert (mode, uid) == ("700", os.getuid()), "the folder was not private"
    assert list(base.iterdir()) == [], "left behind"


@pytest.mark.integration
def test_ctrl_c_leaves_no_kubeconfig_behind(tmp_path: Path) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    wrapper, _ = interrupted(tmp_path, presses=1, TMPDIR=str(base), FAKE_PROVIDER_KUBECONFIG="1")
    folder, _, _ = provider_folder(tmp_path)
    assert (folder / "kubeconfig1234").exists(), "while pulumi runs, its plugins' files are there"
    (tmp_path / "finish").write_text("")
    wrapper.communicate(timeout=60)
    assert wrapper.returncode == 8
    assert list(base.iterdir()) == []


@pytest.mark.integration
def test_a_folder_left_by_a_killed_wrapper_goes_at_the_next_run(tmp_path: Path) -> None:
    base = tmp_path / "tmp"
    (base / "gpulab-pulumi.999999999.abcd").mkdir(parents=True)  # no such pid: its wrapper was killed with KILL
    (base / "gpulab-pulumi.999999999.abcd" / "kubeconfig5678").write_text("users: []\n")
    (base / "someone-elses").mkdir()
    result = subprocess.run(
        [*WRAPPER, "dev", "pulumi", "up"],
        cwd=ROOT,
        env=fake_env(tmp_path, TMPDIR=str(base)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert [path.name for path in base.iterdir()] == ["someone-elses"]


def test_what_must_outlive_the_run_keeps_the_users_tmpdir(tmp_path: Path) -> None:
    """Process mode's programs outlive `pulumi up` (kwokctl's control plane, HAMi, the bind-time role, the relay):
    they get GPULAB_TMPDIR, the user's, not the private folder make removes."""
    from process_lab.commands import lasting

    private = {"TMPDIR": str(tmp_path / "gpulab-pulumi.1.x"), "GPULAB_TMPDIR": str(tmp_path)}
    assert lasting(private)["TMPDIR"] == str(tmp_path)
    assert lasting({"TMPDIR": "/somewhere"}) == {"TMPDIR": "/somewhere"}  # not run by make: as it was
