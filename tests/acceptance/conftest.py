"""The live lab, as the acceptance suite sees it: stack outputs, stack config and API clients.

Runs only with `make verify` (GPULAB_ACCEPTANCE=1); otherwise every case skips with one line saying
why. Under `make verify` a missing lab fails every case (and `make verify` stops before pytest with
one line), so a script never sees green without a lab.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from model.config import LabConfig
from model.stack import StackError, stack_config, stack_outputs


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/acceptance/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.acceptance)


@dataclass
class Lab:
    config: LabConfig
    outputs: dict[str, Any]
    management: Any  # kubernetes ApiClient; None in process mode (runtime: process)
    tenants: dict[str, Any]  # tenant name -> ApiClient
    kubeconfigs: dict[str, dict]

    def needs_containers(self, what: str) -> None:
        """Skip, in one line, a check of what only the Docker lab has (process mode runs no container)."""
        if self.config.process_mode:
            pytest.skip(f"not applicable in process mode (runtime: process): {what}")

    def needs_real_nodes(self, what: str) -> None:
        """Skip, in one line, a check of a real kubelet on a lab whose nodes have none (KWOK, kindest/node)."""
        if not self.config.real_nodes:
            pytest.skip(f"for real nodes only (runtime: process, workers: containers): {what}")

    @property
    def hami(self) -> bool:
        return self.config.scheduling.hami

    def needs_hami(self, what: str) -> None:
        """Skip, in one line, a check of HAMi itself on a lab that leaves HAMi out (scheduling.scheduler)."""
        if not self.hami:
            pytest.skip(f"not applicable without HAMi (scheduling.scheduler: kube-scheduler): {what}")


@pytest.fixture(scope="session")
def lab() -> Lab:
    if os.environ.get("GPULAB_ACCEPTANCE") != "1":
        pytest.skip(
            "acceptance cases run against a live lab with `make verify` (after `make up` on a Linux Docker host)"
        )
    try:
        outputs = stack_outputs()
        config = stack_config()
    except StackError as error:
        # `make verify` asked for the live suite: no lab is a failure, never a vacuous pass.
        pytest.fail(f"no live gpulab lab: {error}", pytrace=False)
    if config.process_mode:  # a tenant whose control-plane programs do not all run fails every case in its own way
        from diagnose.host_findings import process_findings
        from model.stack import ROOT, stack_name
        from process_lab.preflight import bin_dir

        stack = stack_name()
        gone = process_findings(ROOT / ".state" / "process" / stack, stack, bin_dir())
        if gone:
            pytest.fail("; ".join(f"{f.where}: {f.reason} ({f.fix})" for f in gone), pytrace=False)
    from boundary.kube_client import api_client  # keys in memory, never in $TMPDIR

    kubeconfigs = {t.name: yaml.safe_load(outputs[f"{t.output_stem}_kubeconfig"]) for t in config.tenants}
    management = outputs.get("management_kubeconfig")  # none in process mode
    return Lab(
        config=config,
        outputs=outputs,
        management=api_client(yaml.safe_load(management)) if management else None,
        tenants={name: api_client(kc) for name, kc in kubeconfigs.items()},
        kubeconfigs=kubeconfigs,
    )
