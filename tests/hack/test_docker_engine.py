"""hack/docker-engine.sh against fakes of docker, dockerd, apt-get and dpkg-query.

The fakes behave as the real programs did on the project's Debian 12 machines (2026-12-02): `docker
info` fails until dockerd serves its socket; `docker run --privileged` fails with runc's "unable to apply caps:
operation not permitted" where the capability bounding set lacks CAP_SYS_RESOURCE, unless dockerd's default
runtime is a wrapper; dockerd writes its --pidfile and ends on TERM. The real engine ran the same script here:
see tests/real/test_docker_daemon.py. And the runtime wrapper against a fake runc, with runc's own arguments.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shared_data import ROOT

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration

FULL = "000001ffffffffff"  # every capability: a laptop, a cloud VM
NO_SYS_RESOURCE = "000001fffeffffff"  # bit 24 cleared: this project's CI machines
CAPS_ERROR = (
    "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create "
    "failed: unable to start container process: unable to apply caps: operation not permitted: unknown."
)

FAKE_DOCKER = r"""#!/usr/bin/env bash
echo "docker $*" >>"$FAKE_DIR/calls"
case "$1" in
  info) [ -e "$FAKE_DIR/engine-up" ] || { echo "Cannot connect to the Docker daemon" >&2; exit 1; } ;;
  image) [ -e "$FAKE_DIR/image" ] ;;
  import) cat >/dev/null; touch "$FAKE_DIR/image" ;;
  run)
    [ -e "$FAKE_DIR/engine-up" ] || exit 1
    case "${FAKE_PROBE:-ok}" in
      ok) exit 0 ;;
      caps) grep -q default-runtime "$DOCKER_CONFIG_DIR/daemon.json" 2>/dev/null && exit 0
            echo "$CAPS_ERROR" >&2; exit 125 ;;
      other) echo "docker: Error response from daemon: no space left on device." >&2; exit 125 ;;
    esac ;;
esac
"""
FAKE_DOCKERD = r"""#!/bin/bash
echo "dockerd $*" >>"$FAKE_DIR/calls"
[ -n "${FAKE_DOCKERD_HANGS:-}" ] && exec -a "$0" sleep 3600  # named by its path: the fixture finds it
pidfile=${2:?}
echo $$ >"$pidfile"
trap 'rm -f "$FAKE_DIR/engine-up"; exit 0' TERM
touch "$FAKE_DIR/engine-up"
while :; do sleep 0.1; done
"""
FAKE_APT = '#!/usr/bin/env bash\necho "apt-get $*" >>"$FAKE_DIR/calls"\n'
FAKE_DPKG_QUERY = '#!/usr/bin/env bash\n[ -n "${FAKE_BUSYBOX_INSTALLED:-}" ] && echo "install ok installed"\n'


def fakes(tmp_path: Path, root: bool = True, dockerd: bool = True) -> Path:
    folder = tmp_path / ("fakes" if root and dockerd else f"fakes-root{int(root)}-dockerd{int(dockerd)}")
    folder.mkdir(exist_ok=True)
    scripts = {"docker": FAKE_DOCKER, "apt-get": FAKE_APT, "dpkg-query": FAKE_DPKG_QUERY}
    if dockerd:
        scripts["dockerd"] = FAKE_DOCKERD
    scripts["id"] = f"#!/bin/sh\necho {0 if root else 1000}\n"
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def engine(tmp_path: Path, action: str, bounding: str = NO_SYS_RESOURCE, fake_bin: Path | None = None, **env):
    status = tmp_path / "status"
    status.write_text(f"Name:\tbash\nCapBnd:\t{bounding}\n")
    busybox = tmp_path / "busybox"
    busybox.write_text("a static busybox")
    # dockerd stays out of PATH unless faked: the machine's own must never run here.
    system = ":".join(part for part in ("/usr/bin", "/bin") if not (Path(part) / "dockerd").exists())
    environment = {
        "PATH": f"{fake_bin or fakes(tmp_path)}:{system}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "FAKE_DIR": str(tmp_path),
        "CAPS_ERROR": CAPS_ERROR,
        "GPULAB_ENGINE_DIR": str(tmp_path / "state"),
        "DOCKER_CONFIG_DIR": str(tmp_path / "etc-docker"),
        "GPULAB_RUNTIME_DIR": str(tmp_path / "lib-gpulab"),
        "GPULAB_PROC_STATUS": str(status),
        "GPULAB_BUSYBOX": str(busybox),
        "GPULAB_POLL_INTERVAL": "0.05",
        "TIMEOUT": "10",
        **env,
    }
    return subprocess.run(
        ["bash", str(ROOT / "hack" / "docker-engine.sh"), action],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def no_fake_dockerd_left(tmp_path: Path):
    """A fake dockerd a failing test left (it runs in a session of its own) is killed: it names tmp_path."""
    yield
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError, ValueError):
            if f"{tmp_path}/".encode() in entry.read_bytes():
                os.kill(int(entry.parent.name), signal.SIGKILL)


def test_an_engine_that_answers_is_used_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "engine-up").touch()
    result = engine(tmp_path, "start")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[gpulab] a Docker engine answers: using it as it is"
    assert calls(tmp_path) == ["docker info"], "nothing installed, started or probed"
    assert not (tmp_path / "state").exists() and not (tmp_path / "etc-docker").exists()
    stopped = engine(tmp_path, "stop")
    assert stopped.returncode == 0 and "nothing to stop" in stopped.stderr
    assert (tmp_path / "engine-up").exists(), "an engine gpulab did not start is never stopped"


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_a_host_with_every_capability_gets_the_engine_and_no_wrapper(tmp_path: Path) -> None:
    result = engine(tmp_path, "start", bounding=FULL, FAKE_PROBE="ok")
    assert result.returncode == 0, result.stderr
    assert "the Docker engine answers and runs privileged containers" in result.stderr
    made = calls(tmp_path)
    assert [call for call in made if call.startswith("dockerd")] == [f"dockerd --pidfile {tmp_path}/state/dockerd.pid"]
    assert "apt-get install -y -qq --no-install-recommends busybox-static" in made
    assert not (tmp_path / "etc-docker" / "daemon.json").exists(), "nothing changed where nothing needs it"
    assert engine(tmp_path, "stop").returncode == 0
    assert not (tmp_path / "engine-up").exists() and not (tmp_path / "state").exists()


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_a_missing_dockerd_is_installed_from_debian(tmp_path: Path) -> None:
    bin_dir = fakes(tmp_path, dockerd=False)
    result = engine(tmp_path, "start", fake_bin=bin_dir, TIMEOUT="1")
    assert "apt-get install -y -qq --no-install-recommends docker.io iptables" in calls(tmp_path)
    assert result.returncode != 0  # the fake apt-get installs nothing: dockerd is still missing, and says so


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_privileged_containers_failing_for_the_capability_get_the_wrapper_and_stop_undoes_it(tmp_path: Path) -> None:
    result = engine(tmp_path, "start", FAKE_PROBE="caps")
    assert result.returncode == 0, result.stderr
    assert "lacks CAP_SYS_RESOURCE" in result.stderr
    config = json.loads((tmp_path / "etc-docker" / "daemon.json").read_text())
    wrapper = tmp_path / "lib-gpulab" / "runc-without-sys-resource"
    assert config == {"runtimes": {"gpulab-runc": {"path": str(wrapper)}}, "default-runtime": "gpulab-runc"}
    assert os.access(wrapper, os.X_OK)
    assert [call for call in calls(tmp_path) if call.startswith("docker run")] == [
        "docker run --rm --privileged --network none gpulab-probe:busybox true"
    ] * 2, "probed, then probed again with the wrapper"
    assert len([call for call in calls(tmp_path) if call.startswith("dockerd")]) == 2, "dockerd restarted"
    stopped = engine(tmp_path, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not (tmp_path / "etc-docker" / "daemon.json").exists() and not wrapper.exists()
    assert not (tmp_path / "engine-up").exists()


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_the_same_error_on_a_host_that_has_the_capability_is_never_worked_around(tmp_path: Path) -> None:
    result = engine(tmp_path, "start", bounding=FULL, FAKE_PROBE="caps")
    assert result.returncode == 1
    assert "a privileged container fails on this engine" in result.stderr and "unable to apply caps" in result.stderr
    assert not (tmp_path / "etc-docker" / "daemon.json").exists()
    engine(tmp_path, "stop")


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_another_failure_of_the_probe_is_named(tmp_path: Path) -> None:
    result = engine(tmp_path, "start", FAKE_PROBE="other")
    assert result.returncode == 1 and "no space left on device" in result.stderr
    assert not (tmp_path / "etc-docker" / "daemon.json").exists()
    engine(tmp_path, "stop")


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_a_daemon_configuration_gpulab_did_not_write_is_never_edited(tmp_path: Path) -> None:
    (tmp_path / "etc-docker").mkdir()
    (tmp_path / "etc-docker" / "daemon.json").write_text('{"log-driver": "journald"}\n')
    result = engine(tmp_path, "start", FAKE_PROBE="caps")
    assert result.returncode == 1 and "does not edit a daemon configuration it did not write" in result.stderr
    assert (tmp_path / "etc-docker" / "daemon.json").read_text() == '{"log-driver": "journald"}\n'
    engine(tmp_path, "stop")
    assert (tmp_path / "etc-docker" / "daemon.json").exists(), "stop removes only what start wrote"


def test_without_root_it_says_so_and_changes_nothing(tmp_path: Path) -> None:
    result = engine(tmp_path, "start", fake_bin=fakes(tmp_path, root=False))
    assert result.returncode == 1
    assert "only root can start one: start Docker" in result.stderr
    assert calls(tmp_path) == ["docker info"]


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_a_dockerd_that_never_answers_ends_the_wait_at_its_timeout(tmp_path: Path) -> None:
    result = engine(tmp_path, "start", TIMEOUT="1", FAKE_DOCKERD_HANGS="1")
    assert result.returncode == 1
    assert "timed out after 1s waiting for the Docker engine this script started to answer" in result.stderr


@pytest.mark.usefixtures("no_fake_dockerd_left")
def test_a_dockerd_that_ended_is_stopped_even_while_nobody_reaps_it(tmp_path: Path) -> None:
    """Boundary: the kernel keeps an ended process's /proc entry until its parent reaps it. dockerd's parent is
    PID 1 once `start` has exited, and a container's PID 1 that is not an init (this machine's is not) reaps
    late or never: here its parent never does, so it stays a zombie while `stop` waits."""
    bin_dir = fakes(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "dockerd.started").write_text("started\n")
    never_reaps = subprocess.Popen(  # its child ends on TERM; it never waits for it
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(60)",
         str(bin_dir / "dockerd"), "--pidfile", str(state / "dockerd.pid")],
        env={**os.environ, "FAKE_DIR": str(tmp_path)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "engine-up").exists() and time.monotonic() < deadline:  # its TERM trap is set
            time.sleep(0.02)
        pid = int((state / "dockerd.pid").read_text())
        result = engine(tmp_path, "stop", bin_dir, TIMEOUT="20")  # a loaded machine's margin; it ends at once
        assert result.returncode == 0, result.stderr
        assert "stopped the Docker engine gpulab started" in result.stderr
        assert Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"), "still unreaped: a zombie"
    finally:
        never_reaps.kill()
        never_reaps.wait()


# --- the runtime wrapper: runc's own arguments, a fake runc -----------------------------------------------


def run_wrapper(tmp_path: Path, *args: str) -> list[str]:
    fake_runc = tmp_path / "runc"
    fake_runc.write_text('#!/bin/sh\nprintf "%s\\n" "$@" >"$FAKE_DIR/runc-args"\n')
    fake_runc.chmod(0o755)
    env = {**os.environ, "GPULAB_RUNC": str(fake_runc), "FAKE_DIR": str(tmp_path)}
    subprocess.run([str(ROOT / "hack" / "runc-without-sys-resource"), *args], env=env, check=True, timeout=30)
    return (tmp_path / "runc-args").read_text().splitlines()


CAPS = ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]


def test_the_wrapper_drops_the_capability_from_a_containers_spec(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    spec = {
        "ociVersion": "1.0.2",
        "process": {"capabilities": {name: list(CAPS) for name in ("bounding", "effective")}},
    }
    (bundle / "config.json").write_text(json.dumps(spec))
    argv = ["--root", "/var/run/docker/runtime-runc/moby", "create", "--bundle", str(bundle), "--pid-file", "p", "id1"]
    assert run_wrapper(tmp_path, *argv) == argv, "runc gets the same arguments"
    edited = json.loads((bundle / "config.json").read_text())
    assert edited["process"]["capabilities"]["bounding"] == ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"]
    assert edited["process"]["capabilities"]["effective"] == ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"]
    assert edited["ociVersion"] == "1.0.2"


def test_the_wrapper_drops_it_from_an_exec_process_and_leaves_other_calls_alone(tmp_path: Path) -> None:
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "capabilities": {"permitted": list(CAPS)}}))
    argv = ["--root", "/run/x", "exec", "--process", str(process), "--detach", "id1"]
    assert run_wrapper(tmp_path, *argv) == argv
    assert "CAP_SYS_RESOURCE" not in json.loads(process.read_text())["capabilities"]["permitted"]
    assert run_wrapper(tmp_path, "--root", "/run/x", "state", "id1") == ["--root", "/run/x", "state", "id1"]
