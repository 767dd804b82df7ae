"""Config errors as a user meets them: every problem at once, one format, the real file name, a suggestion
for a typo, one line for a broken file, and never a secret.

Each test goes through the entry point a user runs: `make plan` (preview.main), `policies check`
(policies.checker.main) or the report's stack reader, on a stack file written to a temporary project,
so nothing here depends on the checkout's own stack files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from lab_harness import make_tenant, with_pushed_plugin

from model.config import ConfigError, check_secrets, parse_config
from policies.checker import main as check_main
from preview.__main__ import main as plan_main

LINE = re.compile(r"  gpulab:\S.*?( = .+)?: \S.*")  # the one format of every problem line


def stack(tenants: list[dict] | None = None, **keys) -> dict:
    config = {"tenants": tenants or [make_tenant("tenant-a", 0), make_tenant("tenant-b", 1)], **keys}
    return {"config": {f"gpulab:{key}": value for key, value in config.items()}}


def write(tmp_path: Path, document: dict | str, name: str = "Pulumi.dev.yaml") -> Path:
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    (tmp_path / name).write_text(text)
    return tmp_path


def plan(capsys, project: Path, stack_name: str = "dev") -> tuple[int, str, str]:
    code = plan_main(["--stack", stack_name, "--project-dir", str(project)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check(capsys, project: Path, manifest: str) -> tuple[int, str, str]:
    path = project / "in.yaml"
    path.write_text(manifest)
    code = check_main(["--tenant", "tenant-a", "--project-dir", str(project), str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def config_error(function, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as raised:
        function(*args, **kwargs)
    return str(raised.value)


def assert_one_format(message: str) -> None:
    header, *lines = message.strip().removeprefix("error: ").splitlines()
    assert header == "invalid gpulab configuration (nothing was created):", message
    assert lines and all(LINE.fullmatch(line) for line in lines), message


# --- every problem in one run ---


def four_cross_field_mistakes() -> dict:
    a = make_tenant("tenant-a", 0, podCidr="10.96.0.0/12", serviceCidr="10.96.0.0/16")  # pod/service overlap
    b = make_tenant("tenant-a", 1, kubernetesVersion="v1.37.0")  # duplicate name, above Kamaji's support
    c = make_tenant("tenant-c", 2, podCidr="172.18.0.0/16")  # the kind network `make plan` assumes
    return stack([a, b, c], scheduling={"gpuSchedulerPolicy": "random"})  # and a field error elsewhere


def test_plan_shows_every_cross_field_and_field_error_in_one_run(capsys, tmp_path) -> None:
    code, out, err = plan(capsys, write(tmp_path, four_cross_field_mistakes()))
    assert code == 2 and out == ""
    for fragment in (
        "gpulab:tenants[0].podCidr = '10.96.0.0/12': overlaps serviceCidr 10.96.0.0/16",
        "gpulab:tenants: duplicate names ['tenant-a']",
        "gpulab:tenants[1].kubernetesVersion = 'v1.37.0': the pinned Kamaji supports up to v1.36.x",
        "gpulab:tenants[2].podCidr = '172.18.0.0/16': overlaps the kind network 172.18.0.0/16",
        "gpulab:scheduling.gpuSchedulerPolicy = 'random'",
    ):
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert_one_format(err)


def test_cross_field_errors_of_a_valid_config_are_all_listed() -> None:
    """Without any field error, LabConfig's own check reports all of them (not the first)."""
    config = four_cross_field_mistakes()["config"]
    raw = {key.removeprefix("gpulab:"): value for key, value in config.items() if key != "gpulab:scheduling"}
    raw["tenants"][0].update(serviceCidr="10.200.0.0/16")
    message = str(config_error(parse_config, raw, kind_subnet="172.18.0.0/16"))
    assert "duplicate names" in message and "v1.37.0" in message and "overlaps the kind network" in message
    assert_one_format(message)


def test_a_tenant_lists_all_its_own_problems() -> None:
    tenant = make_tenant(
        "tenant-a",
        0,
        podCidr="10.96.0.0/12",
        serviceCidr="10.96.0.0/16",
        workerImage="kindest/node:v1.36.4",
        workerMode="ssh",
        workers=[{"host": "10.0.0.5"}],
        workloads=[{"name": "w"}, {"name": "w"}],
    )
    message = str(config_error(parse_config, {"tenants": [tenant]}))
    for key in ("tenants[0].podCidr", "tenants[0].workloads:", "tenants[0].workerImage"):
        assert f"gpulab:{key}" in message, message


def test_a_tenant_with_a_bad_field_still_gets_its_other_checks() -> None:
    """pydantic skips a model's own checks when one of its fields fails; those that do not read that field
    are reported anyway, and so are the checks across tenants."""
    a = make_tenant("tenant-a", 0, splitCount=0, podCidr="10.96.0.0/12", serviceCidr="10.96.0.0/16")
    b = make_tenant("tenant-a", 1, gpuMode="real", workloads=[{"name": "w", "replicas": 2}])
    message = config_error(parse_config, {"tenants": [a, b]})
    for fragment in (
        "gpulab:tenants[0].splitCount = 0",  # the field errors
        "gpulab:tenants[1].workloads[0].replicas = 2",
        "gpulab:tenants[0].podCidr = '10.96.0.0/12': overlaps serviceCidr",  # their tenants' own checks
        "gpulab:tenants[1].gpuMode = 'real': gpuMode real needs real GPUs",
        "gpulab:tenants: duplicate names ['tenant-a']",  # across tenants
    ):
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    assert_one_format(message)


def test_a_check_that_reads_a_bad_field_is_not_guessed() -> None:
    """A failed podCidr is not replaced by its default in the overlap check: no made-up second problem."""
    a = make_tenant("tenant-a", 0, podCidr="10.96.0.0/255.255.0.0", serviceCidr="10.244.0.0/16")
    message = config_error(parse_config, {"tenants": [a]})
    assert message.count("gpulab:") == 1 and "podCidr" in message, message


def test_missing_keys_name_the_real_stack_file(capsys, tmp_path) -> None:
    tenant = make_tenant("tenant-a", 0)
    del tenant["name"]
    code, _, err = plan(capsys, write(tmp_path, stack([tenant]), "Pulumi.ci.yaml"), "ci")
    assert code == 2 and "gpulab:tenants[0].name: is required but missing; set it in Pulumi.ci.yaml" in err
    assert "Pulumi.<stack>.yaml" not in err
    code, _, err = plan(capsys, write(tmp_path, {"config": {"gpulab:management": {}}}, "Pulumi.ci.yaml"), "ci")
    assert code == 2 and "declare at least one tenant" in err and "Pulumi.ci.yaml" in err


@pytest.mark.parametrize(
    "change, line",
    [
        (lambda t: t.update(gpu=t.pop("gpus")), "gpulab:tenants[0].gpu: is not a key of gpulab; did you mean `gpus`?"),
        (lambda t: t.update(podCIDR="10.1.0.0/16"), "did you mean `podCidr`?"),
        (lambda t: t.update(limits={"gpumemory": 1}), "gpulab:tenants[0].limits.gpumemory: is not a key of gpulab"),
        (lambda t: t.update(zzz=1), "the keys here are: name, kubernetesVersion"),
    ],
)
def test_a_typo_gets_the_key_it_meant(change, line) -> None:
    tenant = make_tenant("tenant-a", 0)
    change(tenant)
    message = str(config_error(parse_config, {"tenants": [tenant]}))
    assert line in message, message
    assert_one_format(message)


@pytest.mark.parametrize(
    "config",
    [
        {"tenants": []},
        {"tenants": [make_tenant("Bad_Name", 0, podCidr="nope", gpus=[{"model": "A200", "count": True}])]},
        {"tenants": [make_tenant("t", 0)], "management": {"mode": "existing", "install": {"metallb": True}}},
        {"tenants": [make_tenant("t", 0, workloads=[{"name": "w", "replicas": 2}])], "versions": {"kind": {}}},
        {"tenants": [make_tenant("t", 0, surprise={"x": 1})], "management": {"network": "host"}},
    ],
)
def test_every_line_has_one_format(config) -> None:
    assert_one_format(str(config_error(parse_config, config)))


def test_secret_lines_have_the_same_format() -> None:
    config = {"tenants": [make_tenant("t", 0, workerMode="ssh", workers=[{"host": "10.0.0.5"}])]}
    lab = parse_config(with_pushed_plugin(config))
    message = str(config_error(check_secrets, lab, lambda key: False, lambda key: False))
    assert_one_format(message)


# --- one line for a broken file ---

BROKEN_YAML = "config:\n  gpulab:tenants: [\n    {name: a\n  gpulab:versions: {}\n"


def test_plan_on_a_broken_stack_file_is_one_line(capsys, tmp_path) -> None:
    code, out, err = plan(capsys, write(tmp_path, BROKEN_YAML))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: Pulumi.dev.yaml: not valid YAML at line ")


def test_checker_on_a_broken_manifest_is_one_line(capsys, tmp_path) -> None:
    code, out, err = check(capsys, write(tmp_path, stack()), "apiVersion: v1\nkind: Pod\nmetadata: {name: [p\n")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "in.yaml: not valid YAML at line " in err


def test_checker_on_a_broken_stack_file_is_one_line(capsys, tmp_path) -> None:
    code, _, err = check(capsys, write(tmp_path, BROKEN_YAML), "apiVersion: v1\nkind: Pod\n")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "Pulumi.dev.yaml: not valid YAML at line " in err


def test_duplicate_keys_in_a_stack_file_are_one_line(capsys, tmp_path) -> None:
    text = yaml.safe_dump(stack()) + "  gpulab:tenants: []\n"
    code, _, err = plan(capsys, write(tmp_path, text))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "key 'gpulab:tenants' is already set at line 2" in err


# --- never a secret ---

TOKENS = {
    "kubeadm": "abcdef.0123456789abcdef",
    "docker-hub": "dckr_pat_2b3e36beeb386dfdaacb9b46004",
    "gitlab": "glpat-AbCdEf0123456789XyZw",
    "github-classic": "ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3",
    "github-oauth": "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    "github-fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "github-server": "ghs_abcdefghij0123456789",
}


@pytest.mark.parametrize("token", TOKENS.values(), ids=TOKENS.keys())
@pytest.mark.parametrize(
    "place",
    [
        lambda c, v: c["tenants"][0].update(name=v),  # a value
        lambda c, v: c["tenants"][0].update({v: 1}),  # a mapping key
        lambda c, v: c["tenants"][0].update(limits={v: 1}),  # a nested mapping key
        lambda c, v: c.update(management={"network": f"my net {v}"}),  # inside a value
        lambda c, v: c["tenants"][0].update(namespaces=[v]),  # a list item (quoted in a message)
    ],
    ids=["value", "key", "nested-key", "inside", "list-item"],
)
def test_token_formats_are_never_echoed(place, token) -> None:
    config = {"tenants": [make_tenant("tenant-a", 0)]}
    place(config, token)
    message = str(config_error(parse_config, config))
    assert token not in message and token[-10:] not in message, message
    assert_one_format(message)


def test_mapping_keys_are_quoted_and_truncated() -> None:
    config = {"tenants": [make_tenant("tenant-a", 0)]}
    config["tenants"][0]["a b\nc " + "x y " * 100] = 1
    message = str(config_error(parse_config, config))
    line = next(line for line in message.splitlines() if "is not a key" in line)
    assert "x y " * 15 not in line and "\\n" in line and "(406 characters)" in line, line


@pytest.mark.parametrize(
    "text",
    [
        "config:\n  gpulab:tenants:\n    - name: x\n      sshKey: " + TOKENS["github-classic"] + ": oops\n",
        "config:\n  gpulab:tenants: [{name: '" + TOKENS["kubeadm"] + "}]\n",
    ],
)
def test_a_syntax_error_never_prints_the_line(capsys, tmp_path, text) -> None:
    project = write(tmp_path, text)
    code, _, err = plan(capsys, project)
    code2, _, err2 = check(capsys, project, "apiVersion: v1\nkind: Pod\n")
    for value in TOKENS.values():
        assert value not in err + err2, err + err2
    assert code == code2 == 2 and "not valid YAML at line" in err and "not valid YAML at line" in err2


def test_the_report_reads_a_broken_stack_file_without_printing_it(monkeypatch, tmp_path) -> None:
    import model.stack

    write(tmp_path, "config:\n  gpulab:tenants: [" + TOKENS["gitlab"] + "\n")
    monkeypatch.setattr(model.stack, "ROOT", tmp_path)
    with pytest.raises(model.stack.StackError) as raised:
        model.stack.stack_config("dev")
    assert TOKENS["gitlab"] not in str(raised.value) and "not valid YAML at line" in str(raised.value)
