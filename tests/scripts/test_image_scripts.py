"""scripts/pull-image.sh and scripts/load-images.sh against a recording fake docker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from shared_data import ROOT

from tests.hack.test_first_run import BASH, fake_bin

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration

DIGEST = "sha256:" + "a" * 64


def run(tmp_path: Path, script: str, docker: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    calls = tmp_path / "calls"
    body = f'echo "docker $*" >> {calls}\n{docker}'
    fakes = fake_bin(tmp_path / "fakes", docker=body)
    result = subprocess.run(
        [BASH, str(ROOT / "scripts" / script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "GPULAB_POLL_INTERVAL": "0", **env},
        timeout=30,
    )
    return result, calls.read_text().splitlines() if calls.exists() else []


PULL_ENV = {"IMAGE": f"docker.io/clastix/kubectl:v1.35@{DIGEST}", "TAGGED": "docker.io/clastix/kubectl:v1.35"}


def test_pull_by_digest_then_tag(tmp_path: Path) -> None:
    docker = 'case "$1 $2" in "image inspect") exit 1;; esac; exit 0'
    result, calls = run(tmp_path, "pull-image.sh", docker, PLATFORM="linux/amd64", **PULL_ENV)
    assert result.returncode == 0, result.stderr
    assert f"docker pull --quiet --platform linux/amd64 docker.io/clastix/kubectl:v1.35@{DIGEST}" in calls
    assert f"docker tag docker.io/clastix/kubectl:v1.35@{DIGEST} docker.io/clastix/kubectl:v1.35" in calls


def test_an_image_on_the_host_is_not_pulled_again(tmp_path: Path) -> None:
    result, calls = run(tmp_path, "pull-image.sh", "exit 0", PLATFORM="linux/amd64", **PULL_ENV)
    assert result.returncode == 0
    assert not any(call.startswith("docker pull") for call in calls)


def test_a_rate_limit_says_what_to_do(tmp_path: Path) -> None:
    docker = (
        'case "$1 $2" in "image inspect") exit 1;; esac\n'
        'if [ "$1" = pull ]; then echo "Error response from daemon: toomanyrequests: You have reached your '
        'unauthenticated pull rate limit" >&2; exit 1; fi'
    )
    result, _ = run(tmp_path, "pull-image.sh", docker, PLATFORM="linux/amd64", **PULL_ENV)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "429 Too Many Requests" in last and "10 anonymous pulls per hour" in last and "docker login" in last
    assert PULL_ENV["IMAGE"] in last


def test_another_registry_answer_is_named(tmp_path: Path) -> None:
    docker = (
        'case "$1 $2" in "image inspect") exit 1;; esac\n'
        'if [ "$1" = pull ]; then echo "manifest for x not found: manifest unknown" >&2; exit 1; fi'
    )
    result, _ = run(tmp_path, "pull-image.sh", docker, PLATFORM="linux/amd64", **PULL_ENV)
    assert result.returncode == 1 and "the registry said: manifest for x not found" in result.stderr


LOAD_ENV = {"NODE": "tenant-a-worker", "IMAGES": "docker.io/a/x:1 quay.io/b/y:2", "PLATFORM": "linux/amd64"}


def test_load_imports_missing_images_for_the_node_platform_only(tmp_path: Path) -> None:
    docker = 'if [ "$1 $2" = "image save" ] && [ "$3" = --help ]; then echo "  --platform string"; fi; exit 0'
    result, calls = run(tmp_path, "load-images.sh", docker, **LOAD_ENV)
    assert result.returncode == 0, result.stderr
    assert "docker image save --platform linux/amd64 docker.io/a/x:1" in calls
    assert "docker exec -i tenant-a-worker ctr --namespace=k8s.io images import --digests -" in calls
    assert not any("--all-platforms" in call for call in calls)


def test_load_skips_what_the_node_has(tmp_path: Path) -> None:
    docker = 'if [ "$1" = exec ] && [ "$5" = images ] && [ "$6" = ls ]; then echo "$8"; fi; exit 0'
    result, calls = run(tmp_path, "load-images.sh", docker, **LOAD_ENV)
    assert result.returncode == 0, result.stderr
    assert not any("image save" in call and "--help" not in call for call in calls)
    assert result.stderr.count("already in tenant-a-worker") == 2


def node_docker(tmp_path: Path, host_has: str) -> str:
    """A node whose systemd is still starting on the first question, then running; whose containerd holds the
    node image's pause; and a host engine that holds `host_has` (docker image save fails for anything else)."""
    asked = tmp_path / "asked"
    return f"""echo "docker $*" >> {tmp_path}/calls
if [ "$1 $3 $4" = "exec systemctl is-system-running" ]; then
  [ -e {asked} ] && echo running && exit 0
  touch {asked}; echo starting; exit 1
fi
if [ "$1 $3 $5 $6" = "exec ctr images ls" ]; then
  [ "$8" = name==registry.k8s.io/pause:3.10.2 ] && echo "${{8#name==}}"
  exit 0
fi
if [ "$1 $2" = "image save" ]; then
  [ "$3" = --help ] && echo "  --platform string" && exit 0
  [ "${{*: -1}}" = {host_has} ] || exit 1
fi
exit 0"""


def test_a_real_node_gets_what_it_lacks_from_the_host_once_it_has_booted(tmp_path: Path, monkeypatch) -> None:
    """process mode's node containers go through the lab's own loader before the join (boundary: systemd's
    is-system-running while the node boots, then containerd's image list)."""
    from process_lab import node_containers

    fakes = fake_bin(tmp_path / "fakes", docker=node_docker(tmp_path, "localhost/mine:1"))
    monkeypatch.setenv("PATH", f"{fakes}:{os.environ['PATH']}")
    monkeypatch.setenv("GPULAB_POLL_INTERVAL", "0")
    node_containers.load_images("tenant-a-worker", ["registry.k8s.io/pause:3.10.2", "localhost/mine:1"], interval=0)
    calls = (tmp_path / "calls").read_text().splitlines()
    booted = calls.index("docker exec tenant-a-worker systemctl is-system-running", 1)
    first_image = next(i for i, call in enumerate(calls) if "images ls" in call)
    assert booted < first_image, "images are looked for once the node has booted (its boot imports some)"
    saved = [call for call in calls if call.startswith("docker image save") and "--help" not in call]
    assert saved == [f"docker image save --platform {node_containers.node_platform()} localhost/mine:1"]


def test_an_image_neither_the_node_nor_the_host_holds_stops_the_node_naming_it(tmp_path: Path, monkeypatch) -> None:
    from process_lab import node_containers
    from process_lab.commands import ProcessLabError

    fakes = fake_bin(tmp_path / "fakes", docker=node_docker(tmp_path, "localhost/other:1"))
    monkeypatch.setenv("PATH", f"{fakes}:{os.environ['PATH']}")
    monkeypatch.setenv("GPULAB_POLL_INTERVAL", "0")
    with pytest.raises(ProcessLabError) as refused:
        node_containers.load_images("tenant-a-worker", ["localhost/mine:1"], interval=0)
    assert "loading localhost/mine:1 into tenant-a-worker failed (is it on the host?" in str(refused.value)


def test_an_image_built_on_this_host_is_never_pulled_and_its_absence_says_how_to_build_it(tmp_path: Path) -> None:
    """localhost/ images (gpulab's plugin image of `make lab-images`) have no registry: missing, the error names the
    build, and no `docker pull` is tried."""
    image = "localhost/gpulab/hami-device-plugin:v0.36.4"
    docker = 'case "$1 $2" in "image inspect") exit 1;; esac; exit 0'
    result, calls = run(tmp_path, "pull-image.sh", docker, PLATFORM="linux/amd64", IMAGE=image, TAGGED=image)
    assert result.returncode == 1
    assert "no registry serves it" in result.stderr and "`make lab-images`" in result.stderr
    assert not any(call.startswith("docker pull") for call in calls)
    (tmp_path / "calls").unlink()
    present, calls = run(tmp_path, "pull-image.sh", "exit 0", PLATFORM="linux/amd64", IMAGE=image, TAGGED=image)
    assert present.returncode == 0 and not any(call.startswith("docker pull") for call in calls)
