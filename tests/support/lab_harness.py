"""The program under mocks, for tests: preview.harness (shared with `make plan`) plus config builders."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shared_data import json_key

from preview.harness import (  # noqa: F401 (re-exported for the tests)
    DUAL_STACK_IPAM,
    KIND_KUBECONFIG,
    KIND_RECORD,
    MAIN,
    ROOT,
    UNKNOWN_ID,
    LabMocks,
    Program,
    RecordingMonitor,
    Registration,
    is_secret_value,
    run_program,
    tenant_kubeconfig,
    unwrap_secrets,
)

# The tests' own copy of the reference stack: users edit the checkout's Pulumi.<stack>.yaml files.
LAB_PROJECT = ROOT / "tests" / "fixtures" / "lab"


def reference_program() -> Program:
    """The program run once per process on the unchanged reference stack (lab_config()), handed out as a
    copy each time: a test may change its registrations (as policy props) without reaching the next test.
    For a test that patches the program or its components first, run_program() runs it afresh."""
    return shared_program(lab_config())


def shared_program(config: dict[str, Any], secrets: dict[str, str] | None = None) -> Program:
    """run_program(config, secrets=secrets), run once per process for each config several tests share (a
    run is 0.3-0.5 CPU-s), handed out as a copy each time like reference_program()."""
    key = json_key([config, secrets])
    if key is None:
        return run_program(config, secrets=secrets)
    if key not in _SHARED:
        _SHARED[key] = run_program(copy.deepcopy(config), secrets=copy.deepcopy(secrets))
    program = _SHARED[key]
    return Program(
        copy.deepcopy(program.registrations), copy.deepcopy(program.exports), set(program.secret_exports), program.mocks
    )


_SHARED: dict[str, Program] = {}


def stack_keys(path: Path) -> dict[str, Any]:
    """A stack file's config keys without their `gpulab:` prefix, as a fresh copy: the file is parsed once per
    process and per version of it (some 250 tests build on the reference stack; a parse is 5-10 ms)."""
    stat = path.stat()
    return copy.deepcopy(_stack_keys(path, stat.st_mtime_ns, stat.st_size))


@functools.cache
def _stack_keys(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    import yaml

    document = yaml.safe_load(path.read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in document.items()}


def lab_config(tenants: Iterable[dict] | None = None, **keys: Any) -> dict[str, Any]:
    """Config keys (without `gpulab:`); defaults to the tests' reference stack (LAB_PROJECT)."""
    config = stack_keys(LAB_PROJECT / "Pulumi.dev.yaml")
    if tenants is not None:
        config["tenants"] = list(tenants)
    config.update(keys)
    return config


def make_tenant(name: str, index: int, **overrides: Any) -> dict[str, Any]:
    tenant = {
        "name": name,
        "kubernetesVersion": "v1.36.4",
        "podCidr": f"10.{100 + index}.0.0/16",
        "serviceCidr": f"10.{200 + index}.0.0/16",
        "gpus": [{"model": "L4", "count": 1}],
    }
    tenant.update(overrides)
    return tenant


# gpulab's device plugin image as pushed to a registry SSH machines reach. A mock tenant on workerMode: ssh runs
# gpulab's plugin by default (hamiVersion v2.10.0), and SSH machines cannot pull the localhost/ image `make
# lab-images` builds (model/config/hami.py gpulab_plugin_problems): tests of SSH workers for other reasons name this.
PUSHED_PLUGIN_IMAGE = "registry.example.com/gpulab/hami-device-plugin:v0.36.4"
PUSHED_PLUGIN_STACK_LINES = f"  gpulab:versions:\n    hamiDevicePluginImage: {PUSHED_PLUGIN_IMAGE}\n"


def with_pushed_plugin(config: dict[str, Any]) -> dict[str, Any]:
    """config (changed in place, and returned) with versions.hamiDevicePluginImage the pushed image, unless it
    names one."""
    config.setdefault("versions", {}).setdefault("hamiDevicePluginImage", PUSHED_PLUGIN_IMAGE)
    return config
