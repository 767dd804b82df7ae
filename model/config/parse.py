"""parse_config: the `gpulab:*` keys validated into a LabConfig, or one ConfigError listing every problem
(field errors and cross-field ones) in key order."""

from __future__ import annotations

import re
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from model.config.errors import ConfigError, error_message, format_errors, problem_line, unknown_key
from model.config.fields import SshWorker
from model.config.lab import LabConfig, across_tenants
from model.config.management import Management
from model.config.tenant import Tenant
from model.versions import Versions


def _part(model: type[BaseModel], raw: object, context: dict | None = None) -> Any:
    try:
        return model.model_validate(raw, context=context)
    except ValidationError:
        return None


# The tenant keys the checks across tenants read: a tenant with a bad one of these is left out of them.
_ACROSS_KEYS = frozenset(
    {"name", "workers", "workerMode", "podCidr", "serviceCidr", "kubernetesVersion", "workerImage"}
)


def _cross_field_lines(raw: dict[str, Any], error: ValidationError, kind_subnet: str | None) -> list[str]:
    """Cross-field problems that pydantic did not check because a field failed (it runs a model's own checks
    only when all its fields are valid): a tenant's own checks that do not read a failed key, and the checks
    across tenants, on the parts that are valid. Without this they would wait for the next run."""
    if any(not item["loc"] for item in error.errors()):
        return []  # LabConfig's own check ran (every part was valid): its problems are in `error`
    lines: list[str] = []
    management = _part(Management, raw.get("management", {}))
    versions = _part(Versions, raw.get("versions", {}))
    tenants = raw.get("tenants")
    valid = []
    for i, tenant in enumerate(tenants if isinstance(tenants, list) else []):
        if not isinstance(tenant, dict):
            continue
        failed = {
            item["loc"][2] for item in error.errors() if item["loc"][:2] == ("tenants", i) and len(item["loc"]) > 2
        }
        # The tenant without its failed keys (their defaults stand in), read without its own checks.
        found = _part(Tenant, {key: value for key, value in tenant.items() if key not in failed}, {"fields_only": True})
        if found is None:
            continue  # a required key failed: nothing to check against
        if failed:
            lines += [
                problem_line(f"tenants[{i}].{key}", message, value)
                for needs, key, value, message in found.checks()
                if not needs & failed
            ]
        if not failed & _ACROSS_KEYS:
            valid.append((i, found))
    return lines + [
        problem_line(key, message, value)
        for key, value, message in across_tenants(management, valid, versions, kind_subnet)
    ]


# The top-level `gpulab:` keys of the lab itself.
CONFIG_KEYS = tuple(field.alias or name for name, field in LabConfig.model_fields.items())


def _named_secrets(raw: dict[str, Any]) -> set[object]:
    """The keys this config names as holding secrets, read loosely (the config may not validate): such a key is
    the secret's own, and check_secrets reports it when it is missing or set in plain text."""
    names: set[object] = {
        Management.model_fields["kubeconfig_secret"].default,
        SshWorker.model_fields["private_key_secret"].default,
    }
    management, tenants = raw.get("management"), raw.get("tenants")
    if isinstance(management, dict):
        names.add(management.get("kubeconfigSecret"))
    for tenant in tenants if isinstance(tenants, list) else []:
        workers = tenant.get("workers") if isinstance(tenant, dict) else None
        names.update(worker.get("privateKeySecret") for worker in workers or [] if isinstance(worker, dict))
    return names


def parse_config(raw: dict[str, Any], source: str = "the stack file", kind_subnet: str | None = None) -> LabConfig:
    """Validate the `gpulab:*` config keys (without the prefix): every plain key of the stack, so that a misspelled
    one is refused rather than dropped (secret ones are the caller's: check_secrets). Raises ConfigError with
    every problem.

    `source` names the stack file in messages; `kind_subnet` (make plan's assumed kind network) adds the check
    that tenants' ranges stay outside it, which `pulumi up` makes once the network exists."""
    context = {"kind_subnet": kind_subnet} if kind_subnet else None
    known = {key: value for key, value in raw.items() if key in CONFIG_KEYS}
    secret_names = _named_secrets(known)
    lines = [unknown_key(LabConfig, (key,)) for key in raw if key not in CONFIG_KEYS and key not in secret_names]
    try:
        lab = LabConfig.model_validate(known, context=context)
    except ValidationError as error:
        lines += format_errors(LabConfig, error, source) + _cross_field_lines(known, error, kind_subnet)
    if lines:
        raise ConfigError(error_message(sorted(dict.fromkeys(lines), key=_by_key)))
    return lab


def _by_key(line: str) -> list[object]:
    """Lines in key order (`tenants[2]` before `tenants[10]`), a key's lines in the order they were found."""
    key = line.split(" = ", 1)[0].split(": ", 1)[0]
    return [int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", key)]
