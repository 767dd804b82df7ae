"""Stack-file mistakes a tester found, each fed as the user writes it.

Boundary: a `Pulumi.<stack>.yaml` a person typed, read by `make plan` (preview.main) the way the Pulumi CLI
reads it (model.config.stack_file_config: YAML 1.2, `config:` keys with the `gpulab:` namespace). The tests
that say so go through the Pulumi program instead: the config the engine hands `__main__.py` (keys
`gpulab:<name>`, JSON values), set by preview.harness.run_program as the language host sets it."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pytest
from lab_harness import PUSHED_PLUGIN_STACK_LINES

from model.config import load_stack_file
from preview.harness import run_program
from tests.model.test_config_errors import assert_one_format, plan

TENANT_A = """    - name: tenant-a
      podCidr: 10.244.0.0/16
      serviceCidr: 10.96.0.0/16
      gpus: [{model: L4, count: 1}]
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    return tmp_path


def refused(capsys, tmp_path: Path, text: str) -> str:
    code, out, err = plan(capsys, write(tmp_path, text))
    assert code == 2 and out == "", (code, out, err)
    return err


# --- item 1: an unknown top-level key is an error with a did-you-mean, listed with every other problem ---


@pytest.mark.parametrize(
    "key, meant",
    [("managment", "management"), ("schedulling", "scheduling"), ("version", "versions"), ("Tenants", "tenants")],
)
def test_a_misspelled_top_level_key_is_refused_with_the_key_it_meant(capsys, tmp_path, key, meant) -> None:
    text = f"config:\n  gpulab:{key}:\n    name: lab\n  gpulab:tenants:\n{TENANT_A}"
    err = refused(capsys, tmp_path, text)
    assert f"  gpulab:{key}: is not a key of gpulab; did you mean `{meant}`?" in err, err
    assert_one_format(err)


def test_an_unknown_top_level_key_is_listed_with_the_other_problems(capsys, tmp_path) -> None:
    text = "config:\n  gpulab:managment: {name: lab}\n  gpulab:zzz: 1\n  gpulab:tenants:\n" + TENANT_A.replace(
        "count: 1", "count: 2x"
    )
    err = refused(capsys, tmp_path, text)
    lines = err.strip().splitlines()[1:]
    assert [line.split(":")[1].split(" ")[0] for line in lines] == ["managment", "tenants[0].gpus[0].count", "zzz"]
    keys = "runtime, workers, cni, management, sourceCache, tenants, scheduling, versions"
    assert f"gpulab:zzz: is not a key of gpulab; the keys here are: {keys}" in err


def test_a_secret_key_the_config_names_is_not_unknown(capsys, tmp_path) -> None:
    """A key that a worker names as its SSH key is the secret's own: set in plain text, it gets that message."""
    ssh = TENANT_A.replace(
        "gpus:", "workerMode: ssh\n      workers: [{host: 10.0.0.21, privateKeySecret: boxKey}]\n      gpus:"
    )
    text = f"config:\n  gpulab:boxKey: plain\n{PUSHED_PLUGIN_STACK_LINES}  gpulab:tenants:\n{ssh}"
    err = refused(capsys, tmp_path, text)
    assert "gpulab:boxKey: holds the SSH private key for root@10.0.0.21 in plain text" in err, err
    assert "not a key of gpulab" not in err


def test_the_program_refuses_an_unknown_key_too() -> None:
    """Boundary: the Pulumi engine's config for the program (`gpulab:schedulling` as `pulumi up` passes it)."""
    tenants = [{"name": "tenant-a", "gpus": [{"model": "L4", "count": 1}]}]
    with pytest.raises(pulumi.RunError) as raised:
        run_program({"tenants": tenants, "schedulling": {"gpuSchedulerPolicy": "binpack"}})
    assert "gpulab:schedulling: is not a key of gpulab; did you mean `scheduling`?" in str(raised.value)


def test_the_program_sees_the_keys_the_language_host_passes_in_its_environment(monkeypatch) -> None:
    """Boundary: the language host's PULUMI_CONFIG (every key a string, objects as JSON; pulumi runtime/config.py)."""
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpulab:managment": json.dumps({"name": "lab"})}))
    with pytest.raises(pulumi.RunError) as raised:
        run_program({"tenants": [{"name": "tenant-a", "gpus": [{"model": "L4", "count": 1}]}]})
    assert "gpulab:managment: is not a key of gpulab; did you mean `management`?" in str(raised.value)


# --- item 2: a missing `tenants` key ---


def test_a_misspelled_tenants_key_gets_a_did_you_mean_and_no_echo_of_the_config(capsys, tmp_path) -> None:
    err = refused(capsys, tmp_path, f"config:\n  gpulab:tenant:\n{TENANT_A}")
    assert "  gpulab:tenant: is not a key of gpulab; did you mean `tenants`?" in err, err
    assert "  gpulab:tenants: declare at least one tenant" in err
    assert "10.244.0.0/16" not in err, "the config is not echoed as the value"
    assert_one_format(err)


def test_a_key_dedented_out_of_config_is_named(capsys, tmp_path) -> None:
    text = f"config:\n  gpulab:management: {{name: lab}}\ngpulab:tenants:\n{TENANT_A}"
    err = refused(capsys, tmp_path, text)
    assert "gpulab:tenants: is outside `config:`, so it is no config key; indent it under `config:`" in err
    assert "declare at least one tenant" not in err, err


def test_a_dedented_key_is_named_with_every_other_problem(capsys, tmp_path) -> None:
    """One run lists every mistake: the dedented key, and what is wrong elsewhere, judged as if indented."""
    text = f"config:\n  gpulab:schedulling: {{}}\ngpulab:tenants:\n{TENANT_A.replace('count: 1', 'count: 0')}"
    err = refused(capsys, tmp_path, text)
    assert "  gpulab:tenants: is outside `config:`" in err, err
    assert "  gpulab:schedulling: is not a key of gpulab; did you mean `scheduling`?" in err, err
    assert "gpulab:tenants[0].gpus[0].count = 0" in err, err
    assert "declare at least one tenant" not in err, err
    assert_one_format(err.replace("Pulumi.dev.yaml: ", "", 1))  # a read problem names its file first


# --- item 3: an SSH worker inside its tenant's own pod range ---


def ssh_tenants(*hosts_per_tenant: list[str]) -> str:
    text = f"config:\n  gpulab:sshPrivateKey:\n    secure: v1:AAAA:BBBB\n{PUSHED_PLUGIN_STACK_LINES}  gpulab:tenants:\n"
    for i, hosts in enumerate(hosts_per_tenant):
        workers = ", ".join(f"{{host: '{host}'}}" for host in hosts)
        text += (
            f"    - name: tenant-{'ab'[i]}\n      podCidr: 10.{244 + i}.0.0/16\n      serviceCidr: 10.{96 + i}.0.0/16\n"
            f"      workerMode: ssh\n      workers: [{workers}]\n      gpus: [{{model: L4, count: 1}}]\n"
        )
    return text


def test_an_ssh_worker_inside_its_pod_range_is_refused(capsys, tmp_path) -> None:
    err = refused(capsys, tmp_path, ssh_tenants(["10.244.3.7"]))
    assert "gpulab:tenants[0].workers[0].host = '10.244.3.7': is inside the tenant's podCidr 10.244.0.0/16" in err, err
    assert_one_format(err)


def test_an_ssh_worker_inside_its_service_range_is_refused(capsys, tmp_path) -> None:
    err = refused(capsys, tmp_path, ssh_tenants(["10.96.0.10"]))
    assert "gpulab:tenants[0].workers[0].host = '10.96.0.10': is inside the tenant's serviceCidr 10.96.0.0/16" in err


# --- item 4: one machine written two ways in two tenants ---


@pytest.mark.parametrize(
    "first, second",
    [
        ("localhost", "127.0.0.1"),
        ("127.0.0.1", "127.0.0.2"),
        ("::1", "localhost"),
        ("LocalHost", "::ffff:127.0.0.9"),
        ("localhost.localdomain", "localhost"),
        ("box.localhost", "127.0.0.1"),  # RFC 6761 6.3
    ],
)
def test_two_spellings_of_this_machine_are_one_machine(capsys, tmp_path, first, second) -> None:
    err = refused(capsys, tmp_path, ssh_tenants([first], [second]))
    assert f"gpulab:tenants[1].workers[0].host = '{second}': is already a worker of tenant tenant-a" in err, err


def test_different_loopback_ports_stay_different_machines(tmp_path) -> None:
    """127.0.0.1:2222 is a port forward to another machine (a VM); the identity keeps the port."""
    text = ssh_tenants(["127.0.0.1"], ["127.0.0.2"]).replace("{host: '127.0.0.2'}", "{host: '127.0.0.2', port: 2222}")
    lab = load_stack_file(write(tmp_path, text) / "Pulumi.dev.yaml")  # make plan's reader, without its preview
    assert [tenant.workers[0].machine for tenant in lab.tenants] == [("localhost", 22), ("localhost", 2222)]


# --- item 7: pydantic's own words never reach the user ---


@pytest.mark.parametrize(
    "old, new, line",
    [
        ("count: 1", "count: 0", "gpulab:tenants[0].gpus[0].count = 0: must be at least 1; write 1 or more"),
        ("gpus: [{model: L4, count: 1}]", "gpus: []", "gpulab:tenants[0].gpus = []: must list at least 1 entry"),
        ("count: 1", "count: 65", "gpulab:tenants[0].gpus[0].count = 65: must be at most 64; write 64 or less"),
        ("count: 1", "count: two", "gpulab:tenants[0].gpus[0].count = 'two': must be a whole number, e.g. 1"),
        ("count: 1", "count: 1.5", "gpulab:tenants[0].gpus[0].count = 1.5: must be a whole number, e.g. 1"),
        ("name: tenant-a", "name: [a]", "gpulab:tenants[0].name = ['a']: must be a string"),
        ("podCidr: 10.244.0.0/16", "workerMode: vm", "gpulab:tenants[0].workerMode = 'vm': must be one of: "),
        (
            "gpus: [{model: L4, count: 1}]",
            "gpus: {model: L4}",
            "gpulab:tenants[0].gpus = {'model': 'L4'}: must be a list",
        ),
        (
            "gpus: [{model: L4, count: 1}]",
            "gpus: [L4]",
            "gpulab:tenants[0].gpus[0] = 'L4': must be a mapping of keys (`key: value`), e.g. {model: L4, count: 1}",
        ),
        (
            "gpus: [{model: L4, count: 1}]",
            "gpus: [{model: L4, count: 1}]\n      workerMode: ssh\n      workers: [{host: ''}]",
            "gpulab:tenants[0].workers[0].host = '': must not be empty; write a value, e.g. 10.0.0.21",
        ),
        (
            "gpus: [{model: L4, count: 1}]",
            "gpus: [{model: L4, count: 1}]\n      splitCount: 0",
            "gpulab:tenants[0].splitCount = 0: must be at least 1",
        ),
    ],
)
def test_every_message_says_what_to_write(capsys, tmp_path, old, new, line) -> None:
    err = refused(capsys, tmp_path, f"config:\n  gpulab:tenants:\n{TENANT_A.replace(old, new)}")
    assert line in err, err
    for pydantic_words in ("Input should", "List should", "should have at least", "after validation", "Value error"):
        assert pydantic_words not in err, err
    assert_one_format(err)


def test_a_missing_secret_set_under_a_misspelled_name_is_named(capsys, tmp_path) -> None:
    """`gpulab:sshPrivatKey: {secure: ...}` was dropped without a word; the missing key's
    message now names the misspelled secret that is set."""
    ssh = TENANT_A.replace("gpus:", "workerMode: ssh\n      workers: [{host: 10.0.0.21}]\n      gpus:")
    text = f"config:\n  gpulab:sshPrivatKey:\n    secure: v1:AAAA\n{PUSHED_PLUGIN_STACK_LINES}  gpulab:tenants:\n{ssh}"
    err = refused(capsys, tmp_path, text)
    assert "gpulab:sshPrivateKey: is not set (gpulab:sshPrivatKey is set: a misspelling of sshPrivateKey?)" in err, err


def test_a_dedented_key_is_named_with_a_key_set_twice(capsys, tmp_path) -> None:
    text = f"config:\n  gpulab:scheduling: {{}}\n  scheduling: {{}}\ngpulab:tenants:\n{TENANT_A}"
    err = refused(capsys, tmp_path, text)
    assert "  gpulab:tenants: is outside `config:`" in err, err
    assert "  gpulab:scheduling is set twice (with and without `gpulab:`); keep one" in err, err
