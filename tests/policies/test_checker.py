"""`python -m policies check`: the reference cases, other workload shapes, exit codes, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from policies.checker import main

MANIFESTS = ROOT / "tests" / "manifests"


def check(
    capsys, tenant: str, *files: str, stack: str = "dev", project_dir: Path = LAB_PROJECT
) -> tuple[int, str, str]:
    code = main(
        ["--tenant", tenant, "--stack", stack, "--project-dir", str(project_dir), *(str(MANIFESTS / f) for f in files)]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


RUNNING_TRAINERS = [
    "running: Pod/gpu-workloads/trainer-1, Pod/gpu-workloads/trainer-2, Pod/gpu-workloads/trainer-3 "
    "(declared in Pulumi.dev.yaml; placed by HAMi, in this order)",
    "running: GPU-MOCK-tenant-a-0 (NVIDIA-A100-SXM4-80GB): 3 of 10 slots, 60000 of 81920 MB, 90 of 100% cores in use",
]


def test_fourth_share_is_refused_for_cores(capsys) -> None:
    code, out, _ = check(capsys, "tenant-a", "fourth-share.yaml")
    assert code == 1
    lines = out.splitlines()
    assert lines[:2] == RUNNING_TRAINERS and len(lines) == 3, lines
    assert lines[2].startswith(
        "error: tenant tenant-a: Pod/gpu-workloads/trainer-4 on GPU-MOCK-tenant-a-0: CardInsufficientCore:"
    )
    assert "next to what already runs" in lines[2] and "asks 30% cores, 10% free" in lines[2]


def test_90000_mb_is_refused_for_memory_on_both_tenants(capsys) -> None:
    # More than the largest card is decided by the pod alone (the in-tenant admission policy refuses it
    # before HAMi's quota check would see it).
    for tenant, largest in (("tenant-a", 81920), ("tenant-b", 24576)):
        code, out, _ = check(capsys, tenant, "too-much-memory.yaml")
        assert code == 1
        assert (
            f"CardInsufficientMemory: container cuda asks 90000 MB per card; the largest card has {largest} MB" in out
        )


def test_a_fitting_manifest_exits_zero(capsys) -> None:
    code, out, _ = check(capsys, "tenant-a", "fits.yaml")
    assert code == 0, out
    assert out.strip().splitlines() == [
        *RUNNING_TRAINERS,
        "place: Pod/gpu-workloads/notebook: cuda -> GPU-MOCK-tenant-a-0",
        "ok: everything fits tenant tenant-a's cards, limits and quota",
    ]


def test_multi_gpu_job_fits_on_both_l4s(capsys) -> None:
    code, out, _ = check(capsys, "tenant-b", "multi-gpu.yaml")
    assert code == 0, out


def test_multi_gpu_job_is_refused_where_there_is_one_card(capsys) -> None:
    code, out, _ = check(capsys, "tenant-a", "multi-gpu.yaml")
    assert code == 1
    assert "NodeInsufficientDevice" in out and "asks 2 cards, the node has 1" in out


def test_percentage_memory_with_replicas(capsys, tmp_path: Path) -> None:
    """60 % of each 24576 MB L4 is 14745 MB. In gpu-workloads the third replica meets the 40960 MB quota
    first (HAMi checks quota per card before memory); without a quota, the cards refuse it."""
    code, out, _ = check(capsys, "tenant-b", "percentage.yaml")
    assert code == 1
    assert "Deployment/gpu-workloads/infer#3" in out and "ResourceQuotaNotFit" in out
    assert "(29490 MB in use)" in out
    unquoted = tmp_path / "batch.yaml"
    unquoted.write_text((MANIFESTS / "percentage.yaml").read_text().replace("gpu-workloads", "batch"))
    code, out, _ = check(capsys, "tenant-b", str(unquoted))
    assert code == 1, out
    assert "Deployment/batch/infer#3" in out and "CardInsufficientMemory" in out
    assert "asks 14745 MB, 9831 MB free of 24576" in out  # next to another 60 %


def test_gpu_only_pods_are_exclusive(capsys, tmp_path: Path) -> None:
    code, out, _ = check(capsys, "tenant-b", "exclusive.yaml")
    assert code == 1
    # Each whole L4 is 24576 MB and 100 % cores; the second one already exceeds the 40960 MB / 150 % quota.
    assert "StatefulSet/gpu-workloads/whole-cards#2" in out and "ResourceQuotaNotFit" in out
    unquoted = tmp_path / "batch.yaml"
    unquoted.write_text((MANIFESTS / "exclusive.yaml").read_text().replace("gpu-workloads", "batch"))
    code, out, _ = check(capsys, "tenant-b", str(unquoted))
    assert "StatefulSet/batch/whole-cards#3" in out and "CardInsufficientMemory" in out


def test_gpu_requests_in_init_containers_are_refused(capsys) -> None:
    """HAMi never gives an init container a card; the per-pod limit counts it all the same."""
    code, out, _ = check(capsys, "tenant-a", "init-container.yaml")
    assert code == 1
    assert "Pod/gpu-workloads/warmup: InitContainerGpuRequest: init container load-weights asks 30000 MB" in out
    assert "CardInsufficient" not in out, "the app container (1000 MB, 5 %) fits next to trainer-1..3"


def test_cronjob(capsys) -> None:
    code, out, _ = check(capsys, "tenant-a", "cronjob.yaml")
    assert code == 1
    assert "CronJob/gpu-workloads/nightly" in out and "CardInsufficientCore" in out


def test_unknown_tenant_is_bad_input(capsys) -> None:
    code, out, err = check(capsys, "tenant-z", "fits.yaml")
    assert code == 2 and out == ""
    assert "unknown tenant 'tenant-z'; Pulumi.dev.yaml declares: tenant-a, tenant-b" in err


def test_invalid_yaml_is_bad_input(capsys) -> None:
    code, _, err = check(capsys, "tenant-a", "broken.yaml")
    assert code == 2
    assert "broken.yaml: not valid YAML" in err


def test_unreadable_file_is_bad_input(capsys) -> None:
    code, _, err = check(capsys, "tenant-a", "does-not-exist.yaml")
    assert code == 2
    assert "does-not-exist.yaml: cannot read it (No such file or directory)" in err


def test_missing_stack_file_is_bad_input(capsys) -> None:
    code, _, err = check(capsys, "tenant-a", "fits.yaml", stack="prod")
    assert code == 2 and "Pulumi.prod.yaml does not exist" in err


def test_invalid_stack_config_is_bad_input(capsys, tmp_path: Path) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text(
        "config:\n  gpulab:tenants:\n    - {name: a, gpus: [{model: A200, count: 1}]}\n"
    )
    code, _, err = check(capsys, "a", "fits.yaml", project_dir=tmp_path)
    assert code == 2 and "gpulab:tenants[0].gpus[0].model = 'A200'" in err


@pytest.mark.integration
def test_as_a_module_from_the_command_line() -> None:
    """The documented invocation, in a subprocess, from the project directory."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "policies", "check", "--tenant", "tenant-a"),
            *("--project-dir", str(LAB_PROJECT), str(MANIFESTS / "fourth-share.yaml")),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ""},
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "CardInsufficientCore" in result.stdout


@pytest.mark.parametrize("flag", ["--help"])
def test_help(flag: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main([flag])
    assert exited.value.code == 0
    assert "--tenant" in capsys.readouterr().out


def run_module(
    *args: str, stdin: str | None = None, cwd: Path = ROOT, timeout: float = 30, project_dir: Path | None = LAB_PROJECT
):
    """`python -m policies ...` as a person runs it; the project on the path as the venv's gpulab.pth puts it.
    `check` reads the tests' reference stack unless `project_dir` is None (then the checkout's, the default)."""
    if args[:1] == ("check",) and project_dir is not None:
        args = ("check", "--project-dir", str(project_dir), *args[1:])
    return subprocess.run(
        [sys.executable, "-m", "policies", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=timeout,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "code"),
    [((), 2), (("--help",), 0), (("-h",), 0), (("help",), 0), (("chek",), 2), (("chek", "--tenant", "x"), 2)],
)
def test_the_module_prints_usage_and_never_starts_the_analyzer(args: tuple[str, ...], code: int) -> None:
    """Without the CLI's runner, no gRPC server: usage and an exit, well inside 5 seconds."""
    result = run_module(*args, timeout=5)
    assert result.returncode == code
    usage = result.stdout if code == 0 else result.stderr
    assert usage.startswith("usage: python -m policies check") and "subcommands:" in usage
    if code == 2:
        assert result.stderr.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.integration
def test_the_pulumi_cli_way_in_starts_the_analyzer() -> None:
    """The CLI runs `python -u -m pulumi.policy ENGINE .` in the pack directory (pulumi-analyzer-policy-python);
    that must start the analyzer, which prints its port and serves until stopped."""
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=ROOT / "policies",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = process.stdout.readline()
        assert first_line.strip().isdigit(), (first_line, process.stderr.read() if process.poll() is not None else "")
        assert process.poll() is None, "the analyzer serves until the engine stops it"
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.integration
def test_standard_input_from_another_directory(tmp_path: Path) -> None:
    """`-` reads the manifest from stdin, wherever the command runs."""
    result = run_module(
        "check", "--tenant", "tenant-a", "-", stdin=(MANIFESTS / "fourth-share.yaml").read_text(), cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "Pod/gpu-workloads/trainer-4" in result.stdout and "CardInsufficientCore" in result.stdout


@pytest.mark.integration
def test_the_default_stack_file_is_the_checkouts_wherever_the_command_runs(tmp_path: Path) -> None:
    """Without --project-dir, Pulumi.<STACK>.yaml is the checkout's (shown without reading what users put in it)."""
    result = run_module("check", "--tenant", "t", "--stack", "no-such-stack", "-", cwd=tmp_path, project_dir=None)
    assert result.returncode == 2
    assert f"{ROOT / 'Pulumi.no-such-stack.yaml'} does not exist" in result.stderr


def test_standard_input_may_be_named_once(capsys) -> None:
    assert main(["--tenant", "tenant-a", "-", "-"]) == 2
    assert "standard input" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n---\n"])
def test_a_manifest_with_no_objects_is_bad_input(text: str) -> None:
    result = run_module("check", "--tenant", "tenant-a", "-", stdin=text)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: <stdin>: holds no Kubernetes objects (empty, or only comments)"
    assert "ok:" not in result.stdout


def test_a_unit_suffix_on_gpumem_is_explained(capsys, tmp_path: Path) -> None:
    manifest = (MANIFESTS / "fits.yaml").read_text().replace('nvidia.com/gpumem: "20000"', "nvidia.com/gpumem: 20Gi")
    assert "20Gi" in manifest, "fits.yaml asks gpumem 20000"
    (tmp_path / "suffix.yaml").write_text(manifest)
    code, out, _ = check(capsys, "tenant-a", str(tmp_path / "suffix.yaml"))
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, out
    assert "nvidia.com/gpumem is a count of MB" in notes[0]
    assert "HAMi reads '20Gi' as the plain number 21474836480" in notes[0] and "write 20480" in notes[0]
    assert code == 1 and "CardInsufficientMemory" in out


WEB = {"name": "web", "kind": "Deployment", "replicas": 2, "gpumem": 1000, "gpucores": 10}
BIG_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: gpu-workloads}
spec:
  containers:
    - {name: cuda, image: busybox, resources: {limits: {nvidia.com/gpumem: "24000", nvidia.com/gpucores: "10"}}}
"""


def stack_with_web(tmp_path: Path) -> Path:
    """The reference stack with a `web` Deployment on tenant-b (2 x 1000 MB / 10 %)."""
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpulab:tenants"][1]["workloads"] = [WEB]
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    (tmp_path / "big.yaml").write_text(BIG_POD)
    return tmp_path


def test_the_stacks_workloads_already_run_when_a_manifest_arrives(capsys, tmp_path: Path) -> None:
    """HAMi spread the two `web` replicas over both L4s before the 24000 MB pod arrives: 23576 MB free on
    each, so HAMi leaves it Pending. Some other placement (both replicas on one card) would have held it;
    that is not what runs, so this is an error and exit 1, not a stranding warning and `ok`."""
    project = stack_with_web(tmp_path)
    code = main(["--tenant", "tenant-b", "--project-dir", str(project), str(project / "big.yaml")])
    out = capsys.readouterr().out
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("running: Deployment/gpu-workloads/web (declared in Pulumi.dev.yaml")
    assert "1 of 10 slots, 1000 of 24576 MB, 10 of 100% cores in use" in lines[1]
    assert "1 of 10 slots, 1000 of 24576 MB, 10 of 100% cores in use" in lines[2]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and "Pod/gpu-workloads/big" in errors[0], out
    assert "CardInsufficientMemory" in errors[0] and "asks 24000 MB, 23576 MB free of 24576" in errors[0]
    assert "ok:" not in out and "OrderDependentPlacement" not in out


def test_a_manifest_that_fits_next_to_the_running_stack_is_placed(capsys, tmp_path: Path) -> None:
    project = stack_with_web(tmp_path)
    (project / "big.yaml").write_text(BIG_POD.replace('"24000"', '"23000"'))
    code = main(["--tenant", "tenant-b", "--project-dir", str(project), str(project / "big.yaml")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "place: Pod/gpu-workloads/big: cuda -> GPU-MOCK-tenant-b-" in out


# tests/fixtures/lab/Pulumi.sim.yaml: the same tenants as dev, on HAMi v2.10.0 (process mode).


def test_pods_over_the_quota_are_refused_at_create_by_hami_s_webhook_under_v2_10_0(capsys) -> None:
    """dev (v2.8.3) says ResourceQuotaNotFit at scheduling (test_gpu_only_pods_are_exclusive); v2.10.0's webhook
    refuses the second whole card when it is created (pkg/scheduler/webhook.go `Handle` 114-116)."""
    code, out, _ = check(capsys, "tenant-b", "exclusive.yaml", stack="sim")
    assert code == 1
    (line,) = [line for line in out.splitlines() if "whole-cards#2" in line]
    assert "StatefulSet/gpu-workloads/whole-cards#2: ExceedingResourceQuota:" in line
    assert 'admission webhook "vgpu.hami.io" denied the request: exceeding resource quota' in line
    assert "limits.nvidia.com/gpucores=150 (100% in use)" in line


def test_a_percentage_is_not_counted_by_the_webhook_under_v2_10_0(capsys) -> None:
    """The webhook counts a gpumem-percentage as 0 MB: the third 60 % replica meets the quota at scheduling, as in
    dev."""
    code, out, _ = check(capsys, "tenant-b", "percentage.yaml", stack="sim")
    assert code == 1
    assert "Deployment/gpu-workloads/infer#3" in out and "ResourceQuotaNotFit" in out
    assert "exceeding resource quota" not in out


def test_gpu_init_containers_are_placed_under_v2_10_0(capsys) -> None:
    """dev (v2.8.3) refuses them per pod (test_gpu_requests_in_init_containers_are_refused); v2.10.0 places them, and
    a 30000 MB init container fits no L4 of tenant-b."""
    code, out, _ = check(capsys, "tenant-b", "init-container.yaml", stack="sim")
    assert code == 1
    assert "InitContainerGpuRequest" not in out
    assert "Pod/gpu-workloads/warmup" in out and "CardInsufficientMemory" in out
    assert "init container load-weights asks 30000 MB" in out
