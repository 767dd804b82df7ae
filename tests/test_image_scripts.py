"""scripts/pull-image.sh and scripts/load-images.sh against a recording fake docker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shared_data import ROOT
from test_first_run import BASH, fake_bin

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
