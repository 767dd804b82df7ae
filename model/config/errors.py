"""Config errors: one line per problem, naming the key, the value (never a secret: scrubbed and
truncated by model.redact) and the fix."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from model import redact

PROJECT = "gpulab"


class ConfigError(ValueError):
    """Invalid lab configuration; `str()` is the full user-facing message."""


NO_VALUE = object()


class KeyedError(ValueError):
    """A cross-field problem raised by a model validator, with the key(s) it is about, relative to the
    model (`podCidr`, `tenants[1].kubernetesVersion`), so the message names the exact key, not the model."""

    def __init__(self, problems: list[tuple[str, object, str]]) -> None:
        super().__init__("; ".join(message for _, _, message in problems))
        self.problems = problems


def at(key: str, message: str, value: object = NO_VALUE) -> KeyedError:
    """The problem `message` with the key it is about (and the offending value, when there is one)."""
    return KeyedError([(key, value, message)])


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            text = redact.key_part(part)
            path += f".{text}" if path else text
    return path


def shown(key: str, value: object) -> str:
    """How a config value may be echoed in an error: hidden if it looks secret (or sits under a key named
    like a secret), else truncated. Values are echoed so a user sees what was wrong, but never a secret: a
    key pasted under the wrong name would otherwise be printed whole."""
    return redact.shown(value, secret_name=bool(redact.SECRET_NAME.search(key.rsplit(".", 1)[-1])))


def problem_line(key: str, message: str, value: object = NO_VALUE) -> str:
    """The one format of every line of a config error: `  gpulab:KEY[ = VALUE]: MESSAGE`."""
    message = redact.scrub(message)
    if value is NO_VALUE:
        return f"  {PROJECT}:{key}: {message}"
    return f"  {PROJECT}:{key} = {shown(key, value)}: {message}"


def error_message(lines: list[str]) -> str:
    return "invalid gpulab configuration (nothing was created):\n" + "\n".join(lines)


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that the key path `loc` (pydantic's, with aliases) points into, if any."""
    from model.config.lab import LabConfig  # the root model imports this module

    model: Any = LabConfig
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        fields = {field.alias or name: field for name, field in model.model_fields.items()}
        field = fields.get(part) or model.model_fields.get(part)
        if field is None:
            return None
        model = _model_of(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _model_of(annotation: Any) -> Any:
    """The model inside `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if (found := _model_of(arg)) is not None:
                return found
    return None


def _suggestion(loc: tuple[int | str, ...]) -> str:
    """`; did you mean `gpus`?` for an unknown key close to a known one (difflib), else a list of the keys."""
    model = _model_at(loc[:-1])
    if model is None or not isinstance(loc[-1], str):
        return ""
    known = [field.alias or name for name, field in model.model_fields.items()]
    lower = {key.lower(): key for key in known}  # `podCIDR` meant `podCidr`
    close = difflib.get_close_matches(loc[-1].lower(), list(lower), n=1, cutoff=0.6)
    if close and not redact.looks_secret(loc[-1]):
        return f"; did you mean `{lower[close[0]]}`?"
    return f"; the keys here are: {', '.join(known)}"


def _field_problem(item: Any, source: str) -> str:
    loc = tuple(item["loc"])
    key = _key_path(loc) or "<root>"
    message = item["msg"].removeprefix("Value error, ")
    if loc == ("tenants",) and item["type"] in ("missing", "too_short", "list_type"):
        return problem_line(
            key,
            "declare at least one tenant, e.g. [{name: tenant-a, gpus: [{model: A100-80GB, count: 1}]}] "
            f"in {source} (see Pulumi.dev.yaml)",
            item.get("input", NO_VALUE),
        )
    if item["type"] == "missing":
        return problem_line(key, f"is required but missing; set it in {source}")
    if item["type"] == "extra_forbidden":
        return problem_line(key, f"is not a key of gpulab{_suggestion(loc)}")
    if item["type"] in ("value_error", "assertion_error") and not isinstance(item.get("input"), str | int):
        return problem_line(key, message)
    return problem_line(key, message, item.get("input"))


def format_errors(error: ValidationError, source: str = "the stack file") -> list[str]:
    """One line per problem in a ValidationError: field errors, and the keyed cross-field problems."""
    lines = []
    for item in error.errors():
        keyed = (item.get("ctx") or {}).get("error")
        if isinstance(keyed, KeyedError):
            base = _key_path(item["loc"])
            for relative, value, message in keyed.problems:
                key = f"{base}.{relative}" if base and relative and not relative.startswith("[") else base + relative
                lines.append(problem_line(key, message, value))
            continue
        lines.append(_field_problem(item, source))
    return lines
