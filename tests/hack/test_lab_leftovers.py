"""hack/lab_leftovers.py and process mode's preflight against the docker CLI as it behaves: an engine that
answers, one that is absent, and one that hangs (a wedged dockerd keeps the CLI waiting on its socket). A hung
engine must be said, never read as "nothing left"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hack import lab_leftovers
from model.names import OWNER_LABEL
from process_lab import preflight

# Every test here runs gpulab's programs as processes (tests/support/tiers.py).
pytestmark = pytest.mark.integration


def fake_docker(folder: Path, body: str) -> None:
    script = folder / "docker"
    script.write_text(f"#!/usr/bin/env bash\nset -euo pipefail\n{body}\n")
    script.chmod(0o755)


@pytest.fixture
def path_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH whose only docker is the one a test writes into the returned folder."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setattr(lab_leftovers, "ROOT", tmp_path)
    return folder


def test_a_hung_engine_is_a_finding_not_an_empty_lab(path_with: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_docker(path_with, "exec sleep 600")
    monkeypatch.setattr(lab_leftovers, "DOCKER_TIMEOUT", 0.5)
    found = lab_leftovers.leftovers("sim")
    assert found == [
        "the Docker engine: `docker ps -aq` did not answer in 0.5 s, so its containers and networks are not checked"
    ]
    assert lab_leftovers.main(["sim"]) == 1


def test_no_engine_at_all_leaves_nothing_to_find(path_with: Path) -> None:
    assert not (path_with / "docker").exists()
    assert lab_leftovers.leftovers("sim") == []


def test_a_container_and_a_network_labelled_with_the_stacks_folder_are_named(path_with: Path, tmp_path: Path) -> None:
    folder = tmp_path / ".state" / "process" / "sim"
    mine = {"Name": "/sim-tenant-a-worker", "Config": {"Labels": {OWNER_LABEL: f"{folder}/tenant-a"}}}
    other = {"Name": "/someone-else", "Config": {"Labels": {}}}
    network = {"Name": "gpulab-sim", "Labels": {OWNER_LABEL: str(folder)}}
    answers = tmp_path / "answers"
    answers.mkdir()
    for name, document in (("c1", mine), ("c2", other), ("n1", network)):
        (answers / name).write_text(json.dumps([document]))
    fake_docker(
        path_with,
        f"""case "$1 $2" in
  "ps -aq") printf 'c1\\nc2\\n' ;;
  "network ls") echo n1 ;;
  "container inspect"|"network inspect") cat "{answers}/$3" ;;
  *) exit 1 ;;
esac""",
    )
    assert lab_leftovers.leftovers("sim") == ["container sim-tenant-a-worker", "network gpulab-sim"]


def test_preflight_says_a_hung_engine_did_not_answer(path_with: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_docker(path_with, "exec sleep 600")
    monkeypatch.setattr(preflight, "DOCKER_TIMEOUT", 0.5)
    assert preflight.docker_problems(("gpulab/node:v1.36.4",), False, (), path_with) == [
        "workers: containers needs a Docker engine, and `docker info` did not answer in 0.5 s"
    ]


def test_preflight_names_a_node_image_the_engine_lacks(path_with: Path) -> None:
    fake_docker(path_with, '[ "$*" = "image inspect gpulab/node:v1.36.4" ] && exit 1\nexit 0')
    assert preflight.docker_problems(("gpulab/node:v1.36.4", "other:1"), False, (), path_with) == [
        "the node image gpulab/node:v1.36.4 is not in the Docker engine: run `make node-image`"
    ]
