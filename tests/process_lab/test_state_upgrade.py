"""process_lab/state_upgrade.py on exported deployments, with the Pulumi CLI played by a double (its export prints
the deployment, its import reads it on stdin): the boundary is the CLI's `stack export --show-secrets` and `stack
import` documents, whose shape (version 3, deployment.resources[].inputs/outputs, secrets as signature and
plaintext) tests/real/test_state_upgrade_cli.py judges with the real CLI."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from pathlib import Path

from process_lab import state_upgrade
from tests.test_layout import RECORDS_BEFORE_THE_FOLDERS

STACK_URN = "urn:pulumi:sim::gpulab::pulumi:pulumi:Stack::gpulab-sim"


def dynamic(name: str, record: object) -> dict:
    return {
        "urn": f"urn:pulumi:sim::gpulab::pulumi-python:dynamic:Resource::{name}",
        "custom": True,
        "id": name,
        "type": "pulumi-python:dynamic:Resource",
        "inputs": {"__provider": record, "cluster": name},
        "outputs": {"__provider": record, "cluster": name, "running": True},
        "parent": STACK_URN,
    }


def deployment(*resources: dict) -> dict:
    stack = {"urn": STACK_URN, "custom": False, "type": "pulumi:pulumi:Stack"}
    return {"version": 3, "deployment": {"manifest": {}, "resources": [stack, *resources]}}


def test_every_stale_record_is_rewritten_and_nothing_else() -> None:
    old = deployment(*(dynamic(name, record) for name, record in RECORDS_BEFORE_THE_FOLDERS.items()))
    today = state_upgrade.upgraded(RECORDS_BEFORE_THE_FOLDERS["HamiProvider"])
    old["deployment"]["resources"].append(dynamic("already-today", today))
    old["deployment"]["resources"].append(dynamic("not-a-pickle", "bm90IGEgcGlja2xl"))
    new = copy.deepcopy(old)

    changed = state_upgrade.upgrade_deployment(new)

    assert [urn.rsplit("::", 1)[1] for urn in changed] == list(RECORDS_BEFORE_THE_FOLDERS)
    for before, after in zip(old["deployment"]["resources"], new["deployment"]["resources"], strict=True):
        for part in ("inputs", "outputs"):
            values = after.get(part) or {}
            if "__provider" in values:
                assert not state_upgrade.stale(values["__provider"])
        masked = [
            {**r, **{p: {**r[p], "__provider": ""} for p in ("inputs", "outputs") if p in r}} for r in (before, after)
        ]
        assert masked[0] == masked[1]
    assert new["deployment"]["resources"][-2]["inputs"]["__provider"] == today
    assert new["deployment"]["resources"][-1]["inputs"]["__provider"] == "bm90IGEgcGlja2xl"
    assert b"components.process.gpu_node" in base64.b64decode(
        new["deployment"]["resources"][3]["outputs"]["__provider"]
    )


class FakePulumi:
    """`pulumi stack export --show-secrets` prints `exported`; `pulumi stack import` keeps what its stdin holds."""

    def __init__(self, exported: dict) -> None:
        self.exported = exported
        self.imported: dict | None = None
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], stdin: str | None = None, **_: object) -> subprocess.CompletedProcess:
        assert argv[1] == "--cwd"
        self.calls.append(argv[3:])
        if argv[4] == "export":
            return subprocess.CompletedProcess(argv, 0, json.dumps(self.exported), "")
        assert stdin is not None and "--file" not in argv  # the deployment never goes to a file
        self.imported = json.loads(stdin)
        return subprocess.CompletedProcess(argv, 0, "", "")


def secret(record: str) -> dict:
    """A record as `pulumi stack export --show-secrets` shows a secret: its value as JSON under `plaintext`."""
    return {state_upgrade.SECRET_SIGNATURE: "1b47061264138c4ac30d75fd1eb44270", "plaintext": json.dumps(record)}


def checkpoint(backend: Path, document: dict) -> None:
    folder = backend / ".pulumi" / "stacks" / "gpulab"
    folder.mkdir(parents=True)
    resources = document["deployment"]["resources"]
    (folder / "sim.json").write_text(json.dumps({"version": 3, "checkpoint": {"latest": {"resources": resources}}}))


def test_a_stale_state_is_exported_rewritten_and_imported(tmp_path: Path) -> None:
    """As the engine keeps it: the record a secret (ciphertext in the checkpoint, plaintext in the export)."""
    old = deployment(dynamic("tenant-a-processes", RECORDS_BEFORE_THE_FOLDERS["ControlPlaneProvider"]))
    checkpoint(tmp_path, old)  # the checkpoint's record in the clear: it names the old path
    resource = old["deployment"]["resources"][1]
    for part in ("inputs", "outputs"):
        resource[part]["__provider"] = secret(resource[part]["__provider"])
    pulumi = FakePulumi(old)

    changed = state_upgrade.upgrade("sim", cwd=tmp_path, run=pulumi, backend=tmp_path)

    assert changed == [resource["urn"]]
    assert pulumi.calls == [
        ["stack", "export", "--stack", "sim", "--show-secrets"],
        ["stack", "import", "--stack", "sim"],
    ]
    assert pulumi.imported is not None
    for part in ("inputs", "outputs"):
        record = pulumi.imported["deployment"]["resources"][1][part]["__provider"]
        assert set(record) == {state_upgrade.SECRET_SIGNATURE, "plaintext"}  # still a secret
        assert not state_upgrade.stale(record) and state_upgrade.stale(resource[part]["__provider"])
        assert json.loads(record["plaintext"]) == state_upgrade.upgraded(
            RECORDS_BEFORE_THE_FOLDERS["ControlPlaneProvider"]
        )


def test_a_checkpoint_with_secret_records_is_asked_of_the_cli(tmp_path: Path) -> None:
    """Ciphertext says nothing of the path: the export does, and a state of today's is then not imported."""
    today = state_upgrade.upgraded(RECORDS_BEFORE_THE_FOLDERS["HamiProvider"])
    encrypted = {state_upgrade.SECRET_SIGNATURE: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}
    checkpoint(tmp_path, deployment(dynamic("tenant-a-gpus-hami", encrypted)))
    pulumi = FakePulumi(deployment(dynamic("tenant-a-gpus-hami", secret(today))))

    assert state_upgrade.upgrade("sim", cwd=tmp_path, run=pulumi, backend=tmp_path) == []
    assert [call[1] for call in pulumi.calls] == ["export"]


def test_a_state_of_today_or_none_is_left_alone(tmp_path: Path) -> None:
    """With plain-string records, the checkpoint file says so without the CLI: no export, no import. (The engine
    keeps its records as secrets, so a real state is exported each time: test_a_checkpoint_with_secret_records...)"""
    today = state_upgrade.upgraded(RECORDS_BEFORE_THE_FOLDERS["ControlPlaneProvider"])
    pulumi = FakePulumi({})
    assert state_upgrade.upgrade("sim", cwd=tmp_path, run=pulumi, backend=tmp_path) == []  # no stack yet
    checkpoint(tmp_path, deployment(dynamic("tenant-a-processes", today)))
    assert state_upgrade.upgrade("sim", cwd=tmp_path, run=pulumi, backend=tmp_path) == []
    assert pulumi.calls == []


def test_a_failed_export_says_which_and_imports_nothing(tmp_path: Path) -> None:
    checkpoint(tmp_path, deployment(dynamic("x", RECORDS_BEFORE_THE_FOLDERS["HamiProvider"])))

    def failing(argv: list[str], **_: object) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(
            argv, 255, '{"deployment": "never shown"}', "error: passphrase must be set\n"
        )

    try:
        state_upgrade.upgrade("sim", cwd=tmp_path, run=failing, backend=tmp_path)
    except state_upgrade.StateUpgradeError as error:
        assert "pulumi stack export" in str(error) and "passphrase must be set" in str(error)
        assert "never shown" not in str(error)
    else:
        raise AssertionError("no error")


def test_a_cli_that_hangs_is_one_line_and_exit_1(monkeypatch, capsys) -> None:
    """process_lab.commands.run stops a CLI past its deadline (TERM, then KILL) and raises ProcessLabError: `make`
    then shows one line, not a traceback."""

    def hangs(*_: object, **__: object) -> list[str]:
        raise state_upgrade.ProcessLabError("pulumi stack export: no answer within 300 s (pulumi)")

    monkeypatch.setattr(state_upgrade, "upgrade", hangs)
    assert state_upgrade.main(["sim"]) == 1
    assert capsys.readouterr().err == (
        "[gpulab] stack sim: upgrading its state's provider paths failed: "
        "pulumi stack export: no answer within 300 s (pulumi)\n"
    )
