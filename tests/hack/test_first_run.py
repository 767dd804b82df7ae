"""What a new user meets first: `make up`'s preflight, `make down` with nothing deployed, `make plan`."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from preview.__main__ import main as plan_main

BASH = shutil.which("bash") or "/bin/bash"


def fake_bin(folder: Path, **tools: str) -> Path:
    """A folder of stand-in commands (name -> shell body); the real tools stay reachable after it on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in tools.items():
        (folder / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def preflight(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, **tools: str
) -> subprocess.CompletedProcess:
    fakes = fake_bin(tmp_path / "fakes", **tools)
    return subprocess.run(
        [BASH, str(ROOT / "hack" / "preflight.sh"), *args],
        capture_output=True,
        text=True,
        # No stack file unless a test names one: kind mode, known without starting Python.
        env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "STACK": "no-such-stack", **(env or {})},
        timeout=60,
    )


DOCKER_DOWN = "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' >&2; exit 1"
DOCKER_UP = 'if [ "$1" = info ]; then echo /var/lib/docker; fi'


@pytest.mark.integration
def test_preflight_without_a_docker_daemon_is_one_actionable_line(tmp_path: Path) -> None:
    result = preflight(tmp_path, docker=DOCKER_DOWN)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("[gpulab] preflight: the Docker daemon is not reachable")
    assert "sudo systemctl start docker" in lines[0]


@pytest.mark.integration
def test_preflight_lists_every_problem_at_once(tmp_path: Path) -> None:
    result = preflight(tmp_path, docker=DOCKER_DOWN, uname="echo Darwin", curl="exit 1", make="exit 1")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1
    assert any("needs a Linux Docker host (this is Darwin)" in line for line in lines)
    assert any("Docker daemon is not reachable" in line for line in lines)


@pytest.mark.integration
def test_preflight_wants_room_for_images(tmp_path: Path) -> None:
    df = "echo 'Filesystem 1024-blocks Used Available Capacity Mounted'; echo 'x 100000000 99000000 2097152 99% /'"
    result = preflight(tmp_path, docker=DOCKER_UP, df=df)
    assert result.returncode == 1
    assert "only 2 GB free where Docker keeps images (/var/lib/docker); the reference lab needs about 15 GB" in (
        result.stderr
    )


@pytest.mark.integration
def test_preflight_passes_on_a_ready_host(tmp_path: Path) -> None:
    df = "echo 'Filesystem 1024-blocks Used Available Capacity Mounted'; echo 'x 100000000 1 90000000 1% /'"
    result = preflight(tmp_path, docker=DOCKER_UP, df=df)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[gpulab] preflight: ok"


ROOMY_DF = "echo 'Filesystem 1024-blocks Used Available Capacity Mounted'; echo 'x 100000000 1 90000000 1% /'"
BARE_PYTHON = f'exec {sys.executable} -S "$@"'  # no site-packages: no pydantic
OLD_PYTHON = 'if [ "$1" = -c ]; then case "$2" in *version_info*) exit 1;; *) echo 3.10.12;; esac; fi'


@pytest.mark.integration
def test_preflight_checks_the_python_host_it_is_given(tmp_path: Path) -> None:
    """python3 on PATH is 3.10; PYTHON_HOST names a good one: that is the one the venv is made with."""
    good = preflight(tmp_path, env={"PYTHON_HOST": sys.executable}, python3=OLD_PYTHON, docker=DOCKER_UP, df=ROOMY_DF)
    assert good.returncode == 0, good.stderr
    old = preflight(tmp_path, env={"PYTHON_HOST": "python3.10"}, **{"python3.10": OLD_PYTHON}, docker=DOCKER_UP)
    assert old.returncode == 1
    assert "python3.10 is 3.10.12; gpulab needs 3.11 or newer (e.g. make PYTHON_HOST=python3.12 up)" in old.stderr
    missing = preflight(tmp_path, env={"PYTHON_HOST": "python3.99"}, docker=DOCKER_UP)
    assert "python3.99 is missing" in missing.stderr and missing.returncode == 1


@pytest.mark.integration
def test_preflight_names_a_python_without_venv(tmp_path: Path) -> None:
    """Debian's python3 without python3-venv: a real interpreter whose `import ensurepip` fails (ImportError there;
    any error counts). A program that exits as the check once did, but is no Python, is not taken for one."""
    for name, error in (("import-error", "ImportError('No module named ensurepip')"), ("broken", "RuntimeError()")):
        stub = tmp_path / name
        stub.mkdir()
        (stub / "ensurepip.py").write_text(f"raise {error}\n")
        without_venv = f'PYTHONPATH={stub} exec {sys.executable} -S "$@"'
        result = preflight(
            tmp_path / f"{name}-run", env={"PYTHON_HOST": "py"}, py=without_venv, docker=DOCKER_UP, df=ROOMY_DF
        )
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            "[gpulab] preflight: py has no venv/ensurepip module: install it (e.g. sudo apt-get install python3-venv)"
        ]
    not_python = preflight(tmp_path / "exit-4", env={"PYTHON_HOST": "py"}, py="exit 4", docker=DOCKER_UP, df=ROOMY_DF)
    assert "py is not a working Python; gpulab needs 3.11 or newer" in not_python.stderr


@pytest.mark.integration
def test_preflight_tells_only_a_non_root_user_to_join_the_docker_group(tmp_path: Path) -> None:
    root = preflight(tmp_path / "root", docker=DOCKER_DOWN, id='[ "$1" = -u ] && echo 0 || echo root')
    assert "Docker daemon is not reachable" in root.stderr and "usermod" not in root.stderr
    user = preflight(tmp_path / "user", docker=DOCKER_DOWN, id='[ "$1" = -u ] && echo 1000 || echo alice')
    assert "make sure alice may use it (sudo usermod -aG docker alice, then log in again)" in user.stderr


@pytest.mark.integration
@pytest.mark.parametrize("value", ["abc", "1.5", "-3", "3 GB", "99999999999999999999"])
def test_preflight_names_a_threshold_that_is_not_a_number(tmp_path: Path, value: str) -> None:
    result = preflight(tmp_path, env={"GPULAB_MIN_PROJECT_GB": value}, docker=DOCKER_UP, df=ROOMY_DF)
    assert result.returncode == 1, "a bad threshold is a problem, never a silently skipped check"
    assert result.stderr.splitlines() == [
        f"[gpulab] preflight: GPULAB_MIN_PROJECT_GB='{value}' is not a whole number: set it to one "
        "(e.g. GPULAB_MIN_PROJECT_GB=3) or unset it for the default 3"
    ]


@pytest.mark.integration
def test_preflight_thresholds_still_apply_when_given(tmp_path: Path) -> None:
    result = preflight(tmp_path, env={"GPULAB_MIN_PROJECT_GB": "100000000"}, docker=DOCKER_UP, df=ROOMY_DF)
    assert result.returncode == 1 and "need about 100000000 GB" in result.stderr


@pytest.mark.integration
def test_preflight_asks_no_docker_of_an_existing_cluster_with_ssh_workers(
    tmp_path: Path, project_stack_file: tuple[str, Path]
) -> None:
    name, path = project_stack_file
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpulab:management"] = {"mode": "existing"}
    for i, tenant in enumerate(document["config"]["gpulab:tenants"]):
        tenant.update(workerMode="ssh", workers=[{"host": f"10.0.0.{10 + i}"}])
    path.write_text(yaml.safe_dump(document))
    result = preflight(tmp_path, env={"STACK": name}, docker=DOCKER_DOWN, df=ROOMY_DF)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[gpulab] preflight: ok"
    # A fresh clone: no ./venv, and a host Python without pydantic cannot read the stack. Docker is asked
    # for (kind is the default), with the way out for this stack.
    bare = {"STACK": name, "VENV": str(tmp_path / "no-venv"), "PYTHON_HOST": "bare-python"}
    result = preflight(tmp_path, env=bare, docker=DOCKER_DOWN, df=ROOMY_DF, **{"bare-python": BARE_PYTHON})
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        f"if stack {name} has an existing cluster and SSH workers only, it needs no Docker: run "
        f"`make plan STACK={name}` once (it creates ./venv, with which preflight can read the stack) and retry"
    )
    # One container worker is enough to need the daemon (kind mode is the default).
    document["config"]["gpulab:management"] = {"mode": "kind"}
    for tenant in document["config"]["gpulab:tenants"]:
        tenant.update(workerMode="container", workers=[])
    path.write_text(yaml.safe_dump(document))
    result = preflight(tmp_path, env={"STACK": name}, docker=DOCKER_DOWN, df=ROOMY_DF)
    assert result.returncode == 1 and "Docker daemon is not reachable" in result.stderr


@pytest.mark.integration
def test_make_up_without_docker_stops_fast_and_creates_nothing(
    tmp_path: Path, project_stack_file: tuple[str, Path]
) -> None:
    name, path = project_stack_file
    path.write_text((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    fakes = fake_bin(tmp_path / "fakes", docker=DOCKER_DOWN)
    venv = tmp_path / "venv"
    result = subprocess.run(  # its bound only ends a hang; "fast" is that it stops before the venv (below)
        ["make", "--no-print-directory", "up", f"VENV={venv}", f"STACK={name}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}"},
        timeout=60,
    )
    assert result.returncode != 0
    assert "Docker daemon is not reachable" in result.stderr
    assert not venv.exists() and not (ROOT / ".state" / "stacks-created-by-test").exists()


def checkpoint(backend: Path, stack: str, resources: list, gz: bool = False) -> None:
    folder = backend / ".pulumi" / "stacks" / "gpulab"
    folder.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"version": 3, "checkpoint": {"stack": stack, "latest": {"resources": resources}}}).encode()
    (folder / f"{stack}.json{'.gz' if gz else ''}").write_bytes(gzip.compress(body) if gz else body)


def stack_state(backend: str, stack: str = "dev") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hack.stack_state", stack],
        cwd=ROOT,  # as make runs it: a module, from the project folder
        capture_output=True,
        text=True,
        env={**os.environ, "PULUMI_BACKEND_URL": backend},
        timeout=30,
    )


@pytest.mark.integration
def test_stack_state_tells_whether_there_is_anything_to_destroy(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    assert stack_state(url).returncode == 3 and "no stack 'dev'" in stack_state(url).stderr
    checkpoint(tmp_path, "dev", [])
    assert stack_state(url).returncode == 3 and "has no resources" in stack_state(url).stderr
    checkpoint(tmp_path, "dev", [{"urn": "a"}, {"urn": "b"}])
    assert stack_state(url).returncode == 0 and "has 2 resources" in stack_state(url).stderr
    checkpoint(tmp_path, "prod", [{"urn": "a"}], gz=True)
    assert stack_state(url, "prod").returncode == 0
    assert stack_state("s3://bucket/state").returncode == 0, "only the CLI can tell for other backends"


@pytest.mark.integration
def test_make_down_with_nothing_deployed_downloads_nothing(tmp_path: Path) -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "down", "STACK=never-deployed"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing to destroy: no stack 'never-deployed'" in result.stderr
    assert "downloading" not in result.stderr and "pulumi destroy" not in result.stdout


def plan(capsys, project: Path = LAB_PROJECT, stack: str = "dev") -> tuple[int, str, str]:
    code = plan_main(["--stack", stack, "--project-dir", str(project)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_plan_of_the_reference_stack(capsys) -> None:
    code, out, _ = plan(capsys)
    assert code == 0, out
    lines = out.splitlines()
    assert "MetalLB pool 172.18.255.239-172.18.255.254" in out
    assert "  gpulab:index:ManagementCluster  management  (component)" in lines
    assert "tenant tenant-a (Kubernetes v1.36.4; 1x A100-80GB; mock GPUs)" in lines
    assert "tenant tenant-b (Kubernetes v1.36.4; 2x L4; mock GPUs)" in lines
    tenant_b = lines.index("tenant tenant-b (Kubernetes v1.36.4; 2x L4; mock GPUs)")
    assert "    docker:index/container:Container  tenant-b-worker-node" in lines[tenant_b:]
    assert "    kubernetes:core/v1:Pod  tenant-a-workloads-trainer-3" in lines[:tenant_b]
    for secret in ("management_kubeconfig", "tenant_a_kubeconfig", "tenant_b_kubeconfig"):
        assert any(line.split() == [secret, "[secret]"] for line in lines), secret
    assert "apiVersion" not in out, "no kubeconfig is printed"
    assert "  gpu-request-limits (mandatory): ok" in lines
    # The Docker lab has what those policies judge: none of them says it had nothing to judge.
    assert "  metallb-pool-ipv4 (mandatory): ok" in lines and "nothing to judge" not in out
    assert lines[-1] == "verdict: ready for `make up`"


def write_stack(tmp_path: Path, change) -> Path:
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    change(document["config"])
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    return tmp_path


def test_plan_of_an_unknown_gpu_model_names_the_key(capsys, tmp_path: Path) -> None:
    project = write_stack(tmp_path, lambda c: c["gpulab:tenants"][0]["gpus"][0].update(model="A200"))
    code, out, err = plan(capsys, project)
    assert code == 2 and out == ""
    assert "gpulab:tenants[0].gpus[0].model = 'A200': unknown GPU model" in err


def test_plan_names_a_tenant_network_inside_the_kind_network(capsys, tmp_path: Path) -> None:
    project = write_stack(tmp_path, lambda c: c["gpulab:tenants"][1].update(serviceCidr="172.18.0.0/20"))
    code, _, err = plan(capsys, project)
    assert code == 2
    assert "gpulab:tenants[1].serviceCidr = '172.18.0.0/20': overlaps the kind network 172.18.0.0/16" in err


def test_plan_fails_on_a_mandatory_policy_violation(capsys, tmp_path: Path) -> None:
    fourth = {"name": "trainer-4", "gpumem": 20000, "gpucores": 30}
    project = write_stack(tmp_path, lambda c: c["gpulab:tenants"][0]["workloads"].append(fourth))
    code, out, _ = plan(capsys, project)
    assert code == 1
    assert "gpu-request-limits (mandatory): " in out and "CardInsufficientCore" in out
    assert out.splitlines()[-1] == "verdict: a mandatory policy refuses this stack"


def test_plan_wants_referenced_secrets_set_as_secrets(capsys, tmp_path: Path) -> None:
    def existing(config: dict) -> None:
        config["gpulab:management"] = {"mode": "existing"}
        for i, tenant in enumerate(config["gpulab:tenants"]):
            tenant.update(workerMode="ssh", workers=[{"host": f"10.0.0.{10 + i}"}])
        config["gpulab:managementKubeconfig"] = "apiVersion: v1"  # plain text: refused

    code, _, err = plan(capsys, write_stack(tmp_path, existing))
    assert code == 2
    assert "gpulab:managementKubeconfig: holds the existing management cluster's kubeconfig in plain text" in err
    assert "gpulab:sshPrivateKey: is not set" in err


@pytest.mark.parametrize("stack", ["nope"])
def test_plan_of_a_missing_stack_file(capsys, stack: str) -> None:
    code, _, err = plan(capsys, stack=stack)
    assert code == 2 and "no stack 'nope': there is no Pulumi.nope.yaml in " in err


def test_plan_text_does_not_depend_on_the_order_resources_registered_in() -> None:
    """Boundary: the plan users diff from run to run, against the order in which the program's resources
    reach the mocks (asynchronous: it changed between runs). The same program, registrations reversed,
    prints the same resource tree and the same policy messages, in the same order."""
    import copy
    import dataclasses

    from lab_harness import lab_config, shared_program

    from preview.__main__ import stack_config, tree, validate
    from preview.pack import run_pack

    config = copy.deepcopy(lab_config())
    big = [{"name": f"big-{i}", "gpumem": 90000} for i in (1, 2)]  # two refusals: messages from two resources
    config["tenants"][0]["workloads"] += big
    program = shared_program(config)
    backwards = dataclasses.replace(program, registrations=dict(reversed(program.registrations.items())))
    lab = validate(*stack_config("dev", LAB_PROJECT))
    assert tree(backwards, lab) == tree(program, lab)
    assert run_pack(backwards) == run_pack(program)
    messages = run_pack(program)["gpu-request-limits"]
    assert messages.index(next(m for m in messages if "big-1" in m)) < messages.index(
        next(m for m in messages if "big-2" in m)
    )


def test_plan_of_a_real_gpu_tenant_shows_no_mock_card_ids(capsys, tmp_path: Path) -> None:
    """Boundary: `make plan` of a stack with `gpuMode: real`: a real card's id is its UUID, known only on its
    node, so the plan (and the stack output it shows) lists the real tenant's cards without the mock's ids."""

    def real(config: dict) -> None:
        config["gpulab:management"] = {"mode": "existing"}
        for i, tenant in enumerate(config["gpulab:tenants"]):
            tenant.update(workerMode="ssh", workers=[{"host": f"10.0.0.{10 + i}"}])
        config["gpulab:tenants"][0]["gpuMode"] = "real"

    project = write_stack(tmp_path, real)
    document = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    document["config"]["gpulab:managementKubeconfig"] = {"secure": "v1:AAAA"}
    document["config"]["gpulab:sshPrivateKey"] = {"secure": "v1:BBBB"}
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    code, out, err = plan(capsys, project)
    assert code == 0, out + err
    [tenant_a] = [line for line in out.splitlines() if line.strip().startswith("tenant_a_gpus ")]
    [tenant_b] = [line for line in out.splitlines() if line.strip().startswith("tenant_b_gpus ")]
    assert "GPU-MOCK" not in tenant_a and '"type": "NVIDIA-A100-SXM4-80GB"' in tenant_a
    assert "GPU-MOCK-tenant-b-0" in tenant_b, "a mock tenant keeps its simulated cards' ids"


@pytest.mark.integration
def test_two_make_ups_at_once_install_the_tools_once(tmp_path: Path) -> None:
    """Two `make up` at once (two terminals, two stacks) share ./bin. Before, each downloaded the Pulumi archive to
    bin/pulumi.tar.gz, extracted it and deleted it, so one deleted or overwrote the archive the other was
    extracting. The stand-in tar takes a second and notes when two extract at once. Boundary: two processes of
    one user in one project folder; flock(1) (util-linux) locks the open file, released when the holder ends."""
    versions = subprocess.run(
        [sys.executable, "-m", "model.versions"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    pins = dict(line.split("=", 1) for line in versions.split() if "=" in line)
    pulumi_version = pins["PULUMI_VERSION"]
    project = tmp_path / "project"
    for folder, name in (("hack", "prereqs.sh"), ("scripts", "lib.sh")):
        (project / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / folder / name, project / folder / name)
    archive = tmp_path / "pulumi.tar.gz"
    executable = tmp_path / "pulumi" / "pulumi"
    executable.parent.mkdir()
    executable.write_text(f"#!/usr/bin/env bash\necho v{pulumi_version}\n")
    executable.chmod(0o755)
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path), "pulumi"], check=True)
    digest = subprocess.run(["sha256sum", str(archive)], capture_output=True, text=True, check=True).stdout.split()[0]
    fakes = fake_bin(
        tmp_path / "fakes",
        uname="echo x86_64",
        docker="echo 27.0.0",
        kind=f"echo 'kind {pins['KIND_VERSION']} go1.24 linux/amd64'",
        kubectl=f"echo 'Client Version: {pins['KUBECTL_VERSION']}'",
        curl=f"""url=${{*: -1}}; out=""
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo "$url" >>{tmp_path}/downloads
case "$url" in
*checksums.txt) echo "{digest}  pulumi-v{pulumi_version}-linux-x64.tar.gz" ;;
*) sleep 0.2; cp {archive} "$out" ;;
esac""",
        tar=f"""[ ! -e {tmp_path}/extracting ] || echo overlap >>{tmp_path}/overlaps
touch {tmp_path}/extracting; sleep 1
rc=0; {shutil.which("tar")} "$@" || rc=$?; rm -f {tmp_path}/extracting; exit $rc""",
    )
    env = {**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(
            [BASH, str(project / "hack" / "prereqs.sh")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "TMPDIR": str(tmp_path)},
        )
        for _ in range(2)
    ]
    results = [run.communicate(timeout=60) for run in runs]
    for run, (_, stderr) in zip(runs, results, strict=True):
        assert run.returncode == 0, stderr
    assert not (tmp_path / "overlaps").exists(), "two runs extracted the Pulumi archive at once"
    archives = [url for url in (tmp_path / "downloads").read_text().split() if url.endswith(".tar.gz")]
    assert len(archives) == 1, f"the archive was downloaded {len(archives)} times"
    assert subprocess.run([project / "bin" / "pulumi"], capture_output=True, text=True).stdout == f"v{pulumi_version}\n"
    assert not (project / "bin" / "pulumi.tar.gz").exists()
