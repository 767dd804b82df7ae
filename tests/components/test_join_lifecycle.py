"""A worker's join across interruptions and races: one join at a time per machine, leftovers of a run killed
with KILL removed by the next, and a bootstrap token that outlives the worst-case join and no longer."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from components.docker.tenant_worker import JOIN_TIMEOUT, join_token_ttl_minutes
from components.shell import remote_script
from scripts.join_config import EXPIRY_COMMENT, join_configuration
from tests.components.test_modes import run_remote
from tests.scripts.test_scripts import (
    FAKES,
    KUBECONFIG,
    ROOT,
    calls,
    container_material,
    node_written,
    processes_of,
    run_container_join,
    run_script,
)


def material(endpoint: str, expires: datetime | None = None) -> str:
    """A JoinConfiguration as join-config.sh prints it (with its expiry line)."""
    header = f"{EXPIRY_COMMENT}{expires.strftime('%Y-%m-%dT%H:%M:%SZ')}\n" if expires else ""
    config = join_configuration(endpoint, "abcdef", "0123456789abcdef", "sha256:5e1f", "gpu-1", ["Swap"])
    return header + yaml.safe_dump(config)


def start_remote_join(tmp_path: Path, tenant: str, endpoint: str, timeout: str = "20", **env: str) -> subprocess.Popen:
    """The join as an SSH session runs it (sh -c ...), in a session of its own so a test can KILL all of it."""
    command = remote_script(
        "worker-join.sh",
        {"NODE_NAME": "gpu-1", "TENANT": tenant, "TIMEOUT": timeout},
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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
@pytest.mark.usefixtures("leftovers_killed")
def test_a_lock_another_tenant_holds_is_reported_with_its_holder(tmp_path: Path) -> None:
    """Two tenants list one machine: the second's join waits its TIMEOUT for the lock, then says which tenant's join
    holds it, since when, and which processes have the lock file open (/proc/PID/fd), not just "another join"."""
    first = start_remote_join(tmp_path, "tenant-a", "10.0.0.5:6443", FAKE_JOIN_UNTIL=str(tmp_path / "second-done"))
    wait_for_file(tmp_path / "joining")
    second = start_remote_join(tmp_path, "tenant-b", "10.0.0.6:6443", timeout="1")
    second.wait(timeout=30)
    (tmp_path / "second-done").touch()  # the first join ends once the second has given up
    stderr = (tmp_path / "tenant-b.stderr").read_text()
    assert second.returncode == 1, stderr
    assert re.search(r"another gpulab join \(tenant tenant-a, pid \d+, since \S+Z\) has held the lock", stderr), stderr
    assert re.search(r"pid \d+: .*kubeadm join --config", stderr), stderr
    assert not (tmp_path / "overlaps").exists()
    first.wait(timeout=30)
    assert first.returncode == 0, (tmp_path / "tenant-a.stderr").read_text()


@pytest.mark.integration
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
    first = subprocess.Popen(
        ["sh", "-c", f"bash {ROOT / 'scripts' / 'worker-join.sh'}"],  # as pulumi-command runs a Command
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    first.stdin.write(container_material())
    first.stdin.close()
    wait_for_file(tmp_path / "joining")
    first.kill()  # the /bin/sh only
    first.wait(timeout=10)
    # Success within its TIMEOUT (30 s, a margin for a loaded machine; the first run's join sleeps 300 s) means the
    # re-run ended the first run: a lock still held at the TIMEOUT is an error (worker-join.sh).
    again = run_container_join(tmp_path, TIMEOUT="30")
    assert again.returncode == 0, again.stderr
    assert not (tmp_path / "overlaps").exists(), "two kubeadm joins ran in one container at once"
    assert "an earlier run of this join" in again.stderr, again.stderr
    assert none_left(tmp_path, 10), "the first run outlived the re-run"


@pytest.mark.integration
@pytest.mark.usefixtures("leftovers_killed")
def test_a_join_killed_with_kill_leaves_its_secrets_only_until_the_next_run(tmp_path: Path) -> None:
    """KILL skips every trap: the JoinConfiguration stays on the node's tmpfs, and the `kubeadm join` goes on in
    the container (the daemon does not end an exec's process when its client dies: moby/moby#9098). The next run
    ends that join and removes the file, even when it finds nothing else to do; and the admin kubeconfig a run of
    an older gpulab (which copied it into the container) may have left there."""
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
    process.stdin.write(container_material())
    process.stdin.close()
    deadline = time.monotonic() + 20
    while not (tmp_path / "joined-with").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (tmp_path / "joined-with").exists(), "the join never started"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    left = tmp_path / "node" / "tmp"
    assert (left / "gpulab-join.yaml").exists(), "KILL cleaned up?"
    assert not (left / "gpulab-admin.conf").exists() and "client-key-data" not in node_written(tmp_path)
    (left / "gpulab-admin.conf").write_text(KUBECONFIG)  # as a killed run of an older gpulab left it

    again = run_container_join(tmp_path, FAKE_JOINED="1")
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


@pytest.mark.integration
def test_a_join_the_token_would_not_outlive_is_not_started(tmp_path: Path) -> None:
    env = {"NODE_NAME": "gpu-1", "TENANT": "tenant-a", "TIMEOUT": str(JOIN_TIMEOUT)}
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


@pytest.mark.integration
def test_a_container_join_the_token_would_not_outlive_is_not_started(tmp_path: Path) -> None:
    """A node container's token is made on the Pulumi host as an SSH worker's is (join-config.sh), with the same
    TTL: its join refuses to start when the token would expire before the join's bound."""
    soon = datetime.now(UTC) + timedelta(seconds=2 * JOIN_TIMEOUT)
    result = run_container_join(tmp_path, stdin=container_material(soon), TIMEOUT=str(JOIN_TIMEOUT))
    assert result.returncode == 1
    assert re.search(r"expires in \d+s, before a join could finish \(up to 660s\)", result.stderr), result.stderr
    assert not (tmp_path / "joined-with").exists()
    assert not (tmp_path / "node" / "tmp" / "gpulab-join.yaml").exists()


@pytest.mark.integration
def test_a_joined_node_needs_no_live_token(tmp_path: Path) -> None:
    """A join re-run on a node that has joined (Pulumi re-runs it when its inputs change, an SSH join's whenever
    worker-join.sh does) finds nothing to do, even with material whose token expired long ago: it is not
    refused for a token it does not need."""
    expired = datetime(2020, 1, 1, tzinfo=UTC)
    result = run_container_join(tmp_path, stdin=container_material(expired), FAKE_JOINED="1")
    assert result.returncode == 0, result.stderr
    assert "already joined to tenant tenant-a; nothing to do" in result.stderr
    result = run_container_join(tmp_path, stdin=container_material(expired))
    assert result.returncode == 1 and "expired at 2020-01-01T00:00:00Z" in result.stderr
    assert "kubeadm join --config" not in calls(tmp_path)


@pytest.mark.integration
def test_the_token_join_config_makes_is_deleted_after_a_container_join(tmp_path: Path) -> None:
    """Boundary: a node container's three Commands as Pulumi runs them, one after the other (join-config.sh; then
    worker-join.sh with its stdout; then delete-token.sh with the token id components/docker/tenant_worker.py reads from
    that stdout), against the tenant's API (tests/fakes/kubectl) and the node (tests/fakes/docker). The token the
    first makes is the one the last deletes, and the node never sees the admin kubeconfig."""
    from components.docker.tenant_worker import token_id_of
    from model.node_container import CONTAINER_PREFLIGHT
    from tests.scripts.test_join_config import KUBECONFIG as ADMIN  # with the CA data join-config.sh pins

    made = run_script(
        "join-config.sh",
        tmp_path,
        stdin=ADMIN,
        NODE_NAME="tenant-a-worker",
        TENANT="tenant-a",
        IGNORE_PREFLIGHT=CONTAINER_PREFLIGHT,
        TTL_MINUTES=str(join_token_ttl_minutes(JOIN_TIMEOUT)),
        PYTHON=sys.executable,
        PYTHONPATH=str(ROOT),
    )
    assert made.returncode == 0, made.stderr
    token_id = token_id_of(made.stdout)
    assert token_id and f"name: bootstrap-token-{token_id}" in (tmp_path / "applied").read_text()
    joined = run_container_join(tmp_path, stdin=made.stdout)
    assert joined.returncode == 0, joined.stderr
    assert (tmp_path / "join-config").read_text() == made.stdout
    assert "client-key-data" not in node_written(tmp_path) and "c2VjcmV0" not in node_written(tmp_path)
    deleted = run_script("delete-token.sh", tmp_path, stdin=ADMIN, TOKEN_ID=token_id, TENANT="tenant-a")
    assert deleted.returncode == 0, deleted.stderr
    assert f"-n kube-system delete secret bootstrap-token-{token_id} --ignore-not-found" in calls(tmp_path)
