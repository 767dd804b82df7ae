"""Config errors: one line per problem, naming the key, the value (never a secret: scrubbed and
truncated by boundary.redact) and the fix."""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from boundary import redact

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


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that the key path `loc` (pydantic's, with aliases) points into from `root`, if any."""
    model: Any = root
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


def _suggestion(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """`; did you mean `gpus`?` for an unknown key close to a known one (difflib), else a list of the keys."""
    model = _model_at(root, loc[:-1])
    if model is None or not isinstance(loc[-1], str):
        return ""
    known = [field.alias or name for name, field in model.model_fields.items()]
    lower = {key.lower(): key for key in known}  # `podCIDR` meant `podCidr`
    close = difflib.get_close_matches(loc[-1].lower(), list(lower), n=1, cutoff=0.6)
    if close and not redact.looks_secret(loc[-1]):
        return f"; did you mean `{lower[close[0]]}`?"
    return f"; the keys here are: {', '.join(known)}"


# Examples of a list or mapping key's value, for the messages that say what to write instead.
_EXAMPLES = {
    "gpus": "[{model: L4, count: 1}]",
    "nodes": "[{name: gpu-1, gpus: [{model: L4, count: 1}]}]",
    "namespaces": "[gpu-workloads]",
    "workers": "[{host: 10.0.0.21, user: ubuntu}]",
    "workloads": "[{name: trainer-1, gpumem: 20000, gpucores: 30}]",
    "host": "10.0.0.21",
}


def _example(loc: tuple[int | str, ...]) -> str:
    """`, e.g. EXAMPLE` for the key at `loc`, or for one entry of it (`gpus[0]`: `{model: L4, count: 1}`)."""
    names = [part for part in loc if isinstance(part, str)]
    if not names or names[-1] not in _EXAMPLES:
        return ""
    example = _EXAMPLES[names[-1]]
    return f", e.g. {example[1:-1] if isinstance(loc[-1], int) and example.startswith('[') else example}"


def _instead(item: Any) -> str | None:
    """pydantic's own message for a bound or type error (`Input should be greater than 0`), said as what to
    write instead; None for the errors gpulab words itself."""
    kind, ctx, loc = item["type"], item.get("ctx") or {}, tuple(item["loc"])
    if kind in ("greater_than", "greater_than_equal"):
        least = ctx["gt"] + 1 if kind == "greater_than" else ctx["ge"]  # every bounded field is an integer
        return f"must be at least {least}; write {least} or more"
    if kind in ("less_than", "less_than_equal"):
        most = ctx["lt"] - 1 if kind == "less_than" else ctx["le"]
        return f"must be at most {most}; write {most} or less"
    if kind == "string_too_short":
        return f"must not be empty; write a value{_example(loc)}"
    if kind == "too_short":
        least = ctx["min_length"]
        return f"must list at least {least} {'entry' if least == 1 else 'entries'}{_example(loc)}"
    if kind == "too_long":
        return f"lists {ctx['actual_length']} entries; list at most {ctx['max_length']}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be a whole number, e.g. 1"
    if kind == "string_type":
        return "must be a string (one value, quoted if it looks like a number or a list)"
    if kind in ("bool_type", "bool_parsing"):
        return "must be true or false"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", ctx["expected"])  # pydantic's `'spread' or 'binpack'`
        return f"must be one of: {', '.join(choices)}"
    if kind == "list_type":
        return f"must be a list (`[a, b]`, or one `- ` line per entry){_example(loc)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping of keys (`key: value`){_example(loc)}"
    if kind not in ("value_error", "assertion_error"):
        return f"is not what this key takes ({item['msg']}); see the table in docs/configuration.md"
    return None


def unknown_key(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """The line for a key no model has, with the known key it is closest to (`loc` from the model `root`)."""
    return problem_line(_key_path(loc), f"is not a key of gpulab{_suggestion(root, loc)}")


def _field_problem(root: type[BaseModel], item: Any, source: str) -> str:
    loc = tuple(item["loc"])
    key = _key_path(loc) or "<root>"
    message = item["msg"].removeprefix("Value error, ")
    if loc == ("tenants",) and item["type"] in ("missing", "too_short", "list_type"):
        return problem_line(
            key,
            "declare at least one tenant, e.g. [{name: tenant-a, gpus: [{model: A100-80GB, count: 1}]}] "
            f"in {source} (see Pulumi.dev.yaml)",
            NO_VALUE if item["type"] == "missing" else item["input"],  # a missing key's input is the whole config
        )
    if item["type"] == "missing":
        return problem_line(key, f"is required but missing; set it in {source}")
    if item["type"] == "extra_forbidden":
        return unknown_key(root, loc)
    if item["type"] in ("value_error", "assertion_error") and not isinstance(item.get("input"), str | int):
        return problem_line(key, message)
    return problem_line(key, _instead(item) or message, item.get("input"))


def format_errors(root: type[BaseModel], error: ValidationError, source: str = "the stack file") -> list[str]:
    """One line per problem in a ValidationError of the model `root`: field errors, and the keyed cross-field
    problems."""
    lines = []
    for item in error.errors():
        keyed = (item.get("ctx") or {}).get("error")
        if isinstance(keyed, KeyedError):
            base = _key_path(item["loc"])
            for relative, value, message in keyed.problems:
                key = f"{base}.{relative}" if base and relative and not relative.startswith("[") else base + relative
                lines.append(problem_line(key, message, value))
            continue
        lines.append(_field_problem(root, item, source))
    return lines
