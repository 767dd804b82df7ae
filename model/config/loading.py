"""Where the config comes from: the Pulumi program's stack config (load_config, secret), or a
`Pulumi.<stack>.yaml` read as the Pulumi CLI reads it (offline checker, report, make plan); and the
secret keys the config refers to, checked set and secret."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from boundary import redact, safe_yaml
from model.config.errors import PROJECT, ConfigError, error_message, problem_line
from model.config.lab import LabConfig
from model.config.parse import CONFIG_KEYS, parse_config


def required_secrets(lab: LabConfig) -> dict[str, str]:
    """Secret config keys the lab needs -> what they hold."""
    needed = {}
    if lab.management.mode == "existing":
        needed[lab.management.kubeconfig_secret] = "the existing management cluster's kubeconfig"
    for tenant in lab.tenants:
        for worker in tenant.workers:
            needed.setdefault(worker.private_key_secret, f"the SSH private key for {worker.user}@{worker.host}")
    return needed


def check_secrets(lab: LabConfig, is_set, is_secret, secret_keys: Iterable[str] = ()) -> None:
    """Every secret the config refers to is set, and set as a secret; raises ConfigError. `secret_keys`: the
    secret keys the stack holds, so that a missing one set under a misspelled name is named (a secret key is
    never refused for being unknown: the config may name any key for a secret)."""
    problems = []
    for key, holds in required_secrets(lab).items():
        if not is_set(key):
            close = difflib.get_close_matches(key, [k for k in secret_keys if k != key], n=1, cutoff=0.8)
            hint = f" ({PROJECT}:{close[0]} is set: a misspelling of {key}?)" if close else ""
            problems.append(
                problem_line(
                    key,
                    f"is not set{hint}; it must hold {holds}: pulumi config set --secret {PROJECT}:{key} < FILE",
                )
            )
        elif not is_secret(key):
            problems.append(
                problem_line(
                    key,
                    f"holds {holds} in plain text; set it again with pulumi config set --secret {PROJECT}:{key} < FILE",
                )
            )
    if problems:
        raise ConfigError(error_message(problems))


def _value(text: str | None) -> object:
    """A config value as the engine passes it: an object or list as JSON, a plain string (`runtime: process`)
    as itself. Validation then says what the key takes."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def load_config() -> LabConfig:
    """Read and validate the stack config inside a Pulumi program."""
    import pulumi

    config = pulumi.Config(PROJECT)
    # Every `gpulab:` key the engine passed (PULUMI_CONFIG, or set in-process as the mocks do), so that an unknown
    # one is refused, not dropped; secrets stay out (check_secrets below is about them).
    keys = {*pulumi.runtime.config.CONFIG.get(), *pulumi.runtime.config.get_config_env()}
    names = [key.split(":", 1)[1] for key in sorted(keys) if key.startswith(f"{PROJECT}:")]
    raw = {
        name: _value(config.get(name)) if name in CONFIG_KEYS else config.get(name)
        for name in names
        if not pulumi.runtime.is_config_secret(f"{PROJECT}:{name}")
    }
    try:
        lab = parse_config(
            {key: value for key, value in raw.items() if value is not None}, source=f"Pulumi.{pulumi.get_stack()}.yaml"
        )
        check_secrets(
            lab,
            is_set=lambda key: config.get(key) is not None,
            is_secret=lambda key: pulumi.runtime.is_config_secret(f"{PROJECT}:{key}"),
            secret_keys=[name for name in names if pulumi.runtime.is_config_secret(f"{PROJECT}:{name}")],
        )
        return lab
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None


def secret(key: str):
    """A secret config value (validated present and secret by load_config) as a secret Output."""
    import pulumi

    return pulumi.Config(PROJECT).require_secret(key)


def read_stack_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the document, its `config:` mapping) of a stack file, read as the Pulumi CLI reads it: YAML 1.2 with
    duplicate keys refused (safe_yaml.load_stack). The one reader of stack files, for the config and for the
    secrets guard (hack/secrets_check.py). Raises ConfigError with one line, which the caller prefixes with
    the file's name."""
    try:
        document = safe_yaml.load_stack(safe_yaml.read_text(path), path.name)
    except safe_yaml.YamlError as error:
        raise ConfigError(str(error).removeprefix(f"{path.name}: ").removeprefix(f"{path}: ")) from None
    document = {} if document is None else document
    if not isinstance(document, dict):
        raise ConfigError(f"must be a mapping with a `config:` key, not a {type(document).__name__}")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"`config` must be a mapping of `{PROJECT}:<key>: value`")
    for key in config:
        if not isinstance(key, str):
            raise ConfigError(f"config keys must be strings like `{PROJECT}:tenants`, not {redact.shown(key)}")
    # A config key dedented out of `config:` is a key of the file itself, which holds no config. Said with
    # every other problem of the config, judged as if it were indented, so that one run lists them all.
    outside = [key for key in document if isinstance(key, str) and key.startswith(f"{PROJECT}:")]
    if outside:
        lines = [
            problem_line(
                redact.key_part(key.removeprefix(f"{PROJECT}:")),
                "is outside `config:`, so it is no config key; indent it under `config:`",
            )
            for key in outside
        ]
        raise ConfigError(error_message(lines + _problems({**config, **{key: document[key] for key in outside}})))
    return document, config


def _problems(config: dict[str, Any]) -> list[str]:
    """The lines of every problem parse_config finds in a `config:` mapping (secret values left out)."""
    try:
        parse_config(project_values(config)[0])
    except ConfigError as error:
        header, *lines = str(error).splitlines()
        return lines if lines else [f"  {header}"]  # a key set twice is one line of its own
    return []


def is_secure(value: object) -> bool:
    """A `secure:` value (`pulumi config set --secret`), however the YAML spells it: a mapping whose only key is
    `secure` (sdk/go/common/resource/config/value.go, isSecureValue)."""
    return isinstance(value, dict) and set(value) == {"secure"}


def holds_secure(value: object) -> bool:
    """Whether a config value is, or contains (`pulumi config set --path --secret`), a `secure:` value."""
    if is_secure(value):
        return True
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(holds_secure(child) for child in children)


def stack_file_config(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(`gpulab:*` values without the prefix, secret keys -> placeholder) of a stack file (read_stack_file).
    Raises ConfigError with one line."""
    return project_values(read_stack_file(path)[1])


def project_values(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(`gpulab:*` values without the prefix, secret keys -> placeholder) of a `config:` mapping, a key
    without a namespace taken as the project's (sdk/go/common/workspace/loaders.go,
    stackConfigNamespacedWithProject). Raises ConfigError with one line."""
    plain: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for key, value in config.items():
        namespace, _, name = key.rpartition(":")
        if namespace not in ("", PROJECT):
            continue  # another namespace's key (e.g. kubernetes:...)
        if name in plain or name in secrets:
            raise ConfigError(
                f"{PROJECT}:{redact.key_part(name)} is set twice (with and without `{PROJECT}:`); keep one"
            )
        if is_secure(value):
            secrets[name] = "<secret>"  # encrypted in the file; the program only passes it on
        else:
            plain[name] = value
    return plain, secrets


def load_stack_file(path: Path) -> LabConfig:
    """Validate the `gpulab:*` keys of a `Pulumi.<stack>.yaml` (used by the offline checker and the report)."""
    plain, _ = stack_file_config(path)
    return parse_config(plain, source=path.name)
