"""A worker's join across interruptions and races: one join at a time per machine, leftovers of a run killed
with KILL removed by the next, and a bootstrap token that outlives the worst-case join and no longer."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from test_modes import run_remote
from test_scripts import FAKES, ROOT, calls, processes_of, run_script

from components.shell import remote_script
from components.tenant_worker import JOIN_TIMEOUT, join_token_ttl_minutes
from scripts.join_config import EXPIRY_COMMENT, join_configuration


def material(endpoint: str, expires: datetime | None = None) -> str:
    """A JoinConfiguration as join-config.sh prints it (with its expiry line)."""
    header = f"{EXPIRY_COMMENT}{expires.strftime('%Y-%m-%dT%H:%M:%SZ')}\n" if expires else ""
    config = join_configuration(endpoint, "abcdef", "0123456789abcdef", "sha256:5e1f", "gpu-1", ["Swap"])
    return header + yaml.safe_dump(config)


def start_remote_join(tmp_path: Path, tenant: str, endpoint: str, timeout: str = "20", **env: str) -> subprocess.Popen:
    """The join as an SSH session runs it (sh -c ...), in a session of its own so a test can KILL all of it."""
    command = remote_script(
        "worker-join.sh",
        {"NODE_NAME": "gpu-1", "TENANT": tenant, "TIMEOUT": timeout, "JOIN_CONFIG_ON_STDIN": "1"},
        sudo=False,
    )
    environment = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "KUBEADM_DIR": str(tmp_path / "etc-kubernetes"),
        "GPULAB_NODE_TMPFS": str(tmp_path),
        "GPULAB_POLL_INTERVAL": "0.05",
        **env,
    }
    (tmp_path / f"{tenant}.stdin").write_text(material(endpoint))
    with (tmp_path / f"{tenant}.stdin").open() as stdin, (tmp_path / f"{tenant}.stderr").open("w") as stderr:
        return subprocess.Popen(
            ["sh", "-c", command],
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=environment,
            start_new_session=True,
        )


def test_two_joins_on_one_machine_never_overlap(tmp_path: Path) -> None:
    """Two tenants list the same machine (under two spellings of its address): their joins run one after the
    other, and the second finds the machine joined to the first instead of resetting it mid-join."""
    first = start_remote_join(tmp_path, "tenant-a", "10.0.0.5:6443", FAKE_JOIN_SLEEP="1.5")
    deadline = time.monotonic() + 10
    while not (tmp_path / "joining").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    second = start_remote_join(tmp_path, "tenant-b", "10.0.0.6:6443", FAKE_JOIN_SLEEP="1.5")
    first.wait(timeout=60)
    second.wait(timeout=60)
    first_err, second_err = (tmp_path / "tenant-a.stderr").read_text(), (tmp_path / "tenant-b.stderr").read_text()
    assert first.returncode == 0, first_err
    assert not (tmp_path / "overlaps").exists(), "two kubeadm joins ran on one machine at once"
    assert second.returncode == 1, second_err
    assert "already a node of the cluster at https://10.0.0.5:6443, not of tenant tenant-b" in second_err
    assert "kubeadm reset" not in calls(tmp_path)


def none_left(tmp_path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not processes_of(tmp_path)


def wait_for_file(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), f"{path.name} never appeared"


@pytest.fixture
def leftovers_killed(tmp_path: Path):
    """Whatever a test's scripts left running is killed when it ends, even when it fails."""
    yield
    for pid in processes_of(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.usefixtures("leftovers_killed")
def test_a_rerun_after_a_join_killed_with_kill_ends_its_kubeadm_join(tmp_path: Path) -> None:
    """KILL during an SSH join: the script dies, its `kubeadm join` does not. It runs under `timeout`, in a process
    group of its own (coreutils timeout.c: setpgid(0, 0) unless --foreground), and holds the join lock (flock(1):
    the lock belongs to the open file, which children inherit). An immediate re-run ends it, takes the lock at once
    (not after its TIMEOUT, blaming a second tenant), joins alone, and leaves no JoinConfiguration (it holds the
    token) on the machine's tmpfs."""
    first = start_remote_join(tmp_path, "tenant-a", "10.0.0.5:6443", FAKE_JOIN_SLEEP="300")
    wait_for_file(tmp_path / "joining")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    # A re-run that had to wait for the lock says so; its TIMEOUT (30 s) only bounds a hang on a loaded machine.
    again = start_remote_join(tmp_path, "tenant-a", "10.0.0.5:6443", timeout="30")
    again.wait(timeout=120)
    stderr = (tmp_path / "tenant-a.stderr").read_text()
    assert again.returncode == 0, stderr
    assert "for the join lock" not in stderr, "the re-run waited for the lock instead of ending the killed run's join"
    assert not (tmp_path / "overlaps").exists(), "the re-run joined while the killed run's kubeadm join still ran"
    assert none_left(tmp_path, 10), "the killed run's kubeadm join outlived the re-run"
    assert not (tmp_path / "gpulab-join.yaml").exists(), "a JoinConfiguration with its token stayed on the machine"


@pytest.mark.usefixtures("leftovers_killed")
def test_a_lock_another_tenant_holds_is_reported_with_its_holder(tmp_path: Path) -> None:
    """Two tenants list one machine: the second's join waits its TIMEOUT for the lock, then says which tenant's join
    holds it, since when, and which processes have the lock file open (/proc/PID/fd), not just "another join"."""
    first = start_remote_join(tmp_path, "tenant-a", "10.0.0.5:6443", FAKE_JOIN_SLEEP="3")
    wait_for_file(tmp_path / "joining")
    second = start_remote_join(tmp_path, "tenant-b", "10.0.0.6:6443", timeout="1")
    second.wait(timeout=30)
    stderr = (tmp_path / "tenant-b.stderr").read_text()
    assert second.returncode == 1, stderr
    assert re.search(r"another gpulab join \(tenant tenant-a, pid \d+, since \S+Z\) has held the lock", stderr), stderr
    assert re.search(r"pid \d+: .*kubeadm join --config", stderr), stderr
    assert not (tmp_path / "overlaps").exists()
    first.wait(timeout=30)
    assert first.returncode == 0, (tmp_path / "tenant-a.stderr").read_text()


@pytest.mark.usefixtures("leftovers_killed")
def test_a_rerun_ends_the_join_a_cancelled_pulumi_up_left_running(tmp_path: Path) -> None:
    """Cancelling `pulumi up` kills the /bin/sh pulumi-command started for the join (Go's exec.CommandContext kills
    that one process), and the bash script under it goes on. The re-run of the same container's join ends it first:
    the two never join the container at once, and the first's files are not removed under it."""
    env = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "GPULAB_POLL_INTERVAL": "0.05",
        "GPULAB_KILL_AFTER": "1",
        "CONTAINER": "tenant-a-worker",
        "TENANT": "tenant-a",
        "FAKE_JOIN_SLEEP": "300",  # far beyond the re-run's TIMEOUT: only ending the first run lets it join
    }
    from test_scripts import KUBECONFIG

    first = subprocess.Popen(
        ["sh", "-c", f"bash {ROOT / 'scripts' / 'worker-join.sh'}"],  # as pulumi-command runs a Command
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    first.stdin.write(KUBECONFIG)
    first.stdin.close()
    wait_for_file(tmp_path / "joining")
    first.kill()  # the /bin/sh only
    first.wait(timeout=10)
    # Success within its TIMEOUT (30 s, a margin for a loaded machine; the first run's join sleeps 300 s) means the
    # re-run ended the first run: a lock still held at the TIMEOUT is an error (worker-join.sh).
    again = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", TIMEOUT="30")
    assert again.returncode == 0, again.stderr
    assert not (tmp_path / "overlaps").exists(), "two kubeadm joins ran in one container at once"
    assert "an earlier run of this join" in again.stderr, again.stderr
    assert none_left(tmp_path, 10), "the first run outlived the re-run"


@pytest.mark.usefixtures("leftovers_killed")
def test_a_join_killed_with_kill_leaves_its_secrets_only_until_the_next_run(tmp_path: Path) -> None:
    """KILL skips every trap: the admin kubeconfig and the JoinConfiguration stay on the node's tmpfs, and the
    `kubeadm join` goes on in the container (the daemon does not end an exec's process when its client dies:
    moby/moby#9098). The next run ends that join and removes the files, even when it finds nothing else to do."""
    env = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "GPULAB_POLL_INTERVAL": "0.05",
        "CONTAINER": "tenant-a-worker",
        "TENANT": "tenant-a",
        "FAKE_JOIN_SLEEP": "300",  # far beyond the re-run's TIMEOUT: only ending the first run lets it join
    }
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "worker-join.sh")],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
        start_new_session=True,
    )
    from test_scripts import KUBECONFIG

    process.stdin.write(KUBECONFIG)
    process.stdin.close()
    deadline = time.monotonic() + 20
    while not (tmp_path / "joined-with").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (tmp_path / "joined-with").exists(), "the join never started"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    left = tmp_path / "node" / "tmp"
    assert (left / "gpulab-admin.conf").exists() and (left / "gpulab-join.yaml").exists(), "KILL cleaned up?"

    again = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", FAKE_JOINED="1")
    assert again.returncode == 0, again.stderr
    assert not (left / "gpulab-admin.conf").exists() and not (left / "gpulab-join.yaml").exists()
    assert "ended a kubeadm join an earlier run left running on tenant-a-worker" in again.stderr, again.stderr
    assert none_left(tmp_path, 1), "the killed run's kubeadm join still runs in the container"


def test_the_token_ttl_covers_the_worst_case_join() -> None:
    """An SSH worker's token is made before join-config.sh's wait (TIMEOUT), then the machine waits for systemd
    (TIMEOUT) and runs kubeadm join (bounded at 2 x TIMEOUT + 60 s)."""
    worst = JOIN_TIMEOUT + JOIN_TIMEOUT + (2 * JOIN_TIMEOUT + 60)
    assert join_token_ttl_minutes(JOIN_TIMEOUT) * 60 > worst
    assert join_token_ttl_minutes(JOIN_TIMEOUT) <= 30, "and not much longer: a leaked token stays usable that long"


def test_a_join_the_token_would_not_outlive_is_not_started(tmp_path: Path) -> None:
    env = {"NODE_NAME": "gpu-1", "TENANT": "tenant-a", "TIMEOUT": str(JOIN_TIMEOUT), "JOIN_CONFIG_ON_STDIN": "1"}
    extra = {"KUBEADM_DIR": str(tmp_path / "k"), "GPULAB_NODE_TMPFS": str(tmp_path), "TMPDIR": str(tmp_path)}
    soon = datetime.now(UTC) + timedelta(seconds=2 * JOIN_TIMEOUT)  # less than the join's bound of 2 x T + 60
    result = run_remote(tmp_path, "worker-join.sh", env, stdin=material("10.0.0.5:6443", soon), **extra)
    assert result.returncode == 1
    assert re.search(r"expires in \d+s, before a join could finish \(up to 660s\)", result.stderr), result.stderr
    assert not (tmp_path / "joined-with").exists()

    fresh = datetime.now(UTC) + timedelta(minutes=join_token_ttl_minutes(JOIN_TIMEOUT))
    result = run_remote(tmp_path, "worker-join.sh", env, stdin=material("10.0.0.5:6443", fresh), **extra)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "joined-with").exists()


def test_a_container_workers_token_outlives_its_join(tmp_path: Path) -> None:
    result = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", TIMEOUT="300")
    assert result.returncode == 0, result.stderr
    ttl = re.search(r"kubeadm token create --print-join-command --ttl (\d+)s", calls(tmp_path))
    assert ttl and int(ttl.group(1)) > 2 * 300 + 60, calls(tmp_path)


def test_tokens_a_killed_join_left_are_deleted_by_the_next_run(tmp_path: Path) -> None:
    """Found by the description the join gives its tokens; other tokens in the tenant are not touched."""
    tokens = (
        "bootstrap-token-old123=gpulab:_joins_tenant-a-worker_to_tenant_tenant-a bootstrap-token-keep99=kubeadm_init"
    )
    result = run_script(
        "worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", FAKE_JOINED="1", FAKE_TOKENS=tokens
    )
    assert result.returncode == 0, result.stderr
    log = calls(tmp_path)
    assert "-n kube-system delete secret bootstrap-token-old123" in log
    assert "delete secret bootstrap-token-keep99" not in log, "deleted someone else's token"
    assert "deleted bootstrap token old123 left by an interrupted join of tenant-a-worker" in result.stderr


def test_the_join_names_its_tokens(tmp_path: Path) -> None:
    result = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a")
    assert result.returncode == 0, result.stderr
    assert "--description gpulab: joins tenant-a-worker to tenant tenant-a" in calls(tmp_path)
