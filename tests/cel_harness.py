"""Evaluates a ValidatingAdmissionPolicy's CEL offline, as the API server would, with cel-python.

Kubernetes' CEL adds libraries to the CEL standard; the ones the policies use are implemented here,
following their documented behaviour (k8s.io/apiserver/pkg/cel/library): `quantity(string)`,
`.isInteger()` and `.asInteger()` (an error when the value is not an integer or overflows int64), the
lists library's `.sum()` and `.max()`, and the strings library's `.split(sep)`, `.join(sep)` and
`.upperAscii()`. A validation whose expression raises an error counts as failed, as with
`failurePolicy: Fail`.

What reaches a policy is not what the user wrote (`admitted`): the API server stores quantities in
canonical form (`Quantity.String()`, apimachinery pkg/api/resource/quantity.go CanonicalizeBytes:
20000 -> "20k", 81920 -> "81920", "1024Mi" -> "1Gi"), defaults a Pod's requests from its limits
(SetDefaults_Pod; not a template's), and HAMi's mutating webhook has set a GPU Pod's schedulerName and
`nvidia.com/gpu: 1` where only memory or cores were asked. `run_policy` returns the failures in
validation order: the API server shows only the first (dispatcher.go, deniedDecisions[0]).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes
from shared_data import json_key

from model.quantity import BINARY_SI, INT64_MAX, QuantityError, parse_quantity, suffix_of


@dataclass(frozen=True)
class Quantity:
    value: Fraction


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise ValueError(f"quantity() takes a string, not {type(text).__name__}")
    return _parsed(str(text))


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Quantity:
    try:
        return Quantity(parse_quantity(text))
    except QuantityError as error:
        raise ValueError(f"quantities must match the regular expression: {error}") from None


def _as_integer(quantity: Quantity) -> celtypes.IntType:
    if quantity.value.denominator != 1 or abs(quantity.value) > INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(quantity.value))


def _is_integer(quantity: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(quantity.value.denominator == 1 and abs(quantity.value) <= INT64_MAX)


def _join(values: Any, separator: Any) -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(v) for v in values))


def _sum(values: Any) -> celtypes.IntType:
    return celtypes.IntType(sum(int(v) for v in values))


def _max(values: Any) -> Any:
    if len(values) == 0:
        raise ValueError("max() of an empty list")
    return max(values)


def _split(text: Any, separator: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


def _upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(ch.upper() if "a" <= ch <= "z" else ch for ch in str(text)))


FUNCTIONS = {
    "quantity": _quantity,
    "asInteger": _as_integer,
    "isInteger": _is_integer,
    "join": _join,
    "sum": _sum,
    "max": _max,
    "split": _split,
    "upperAscii": _upper_ascii,
}
_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def _program(expression: str) -> Any:
    if expression not in _PROGRAMS:
        _PROGRAMS[expression] = _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)
    return _PROGRAMS[expression]


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    result = _program(expression).evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise ValueError(str(result.args[0]) if result.args else "CEL evaluation error")
    return result


DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical_quantity(text: str) -> str:
    """The string the API server stores for a quantity (CanonicalizeBytes): the format follows the suffix
    written (binary, decimal exponent, else decimal SI); the mantissa loses trailing zeros down to an
    exponent that is a multiple of 3 (decimal) or of 1024 (binary, for whole values of at least 1024)."""
    value = parse_quantity(text.strip())
    if value == 0:
        return "0"
    suffix = suffix_of(text.strip())
    if suffix in BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        mantissa, power = int(value), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa, power = mantissa // 1024, power + 1
        return f"{mantissa}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}"
    exponent_form = suffix == "" and "e" in text.strip().lower()
    exponent = 0
    while value.denominator != 1:
        value, exponent = value * 10, exponent - 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if exponent_form:
        return f"{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent not in DECIMAL_SUFFIX:
        raise ValueError(f"{text}: no decimal SI suffix for 10^{exponent} in this harness")
    return f"{mantissa}{DECIMAL_SUFFIX[exponent]}"


HAMI_KEYS = ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")


def _pod_spec(obj: dict) -> dict | None:
    kind = obj.get("kind")
    if kind == "Pod":
        return obj.get("spec")
    if kind == "CronJob":
        return obj.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    return obj.get("spec", {}).get("template", {}).get("spec")


def admitted(obj: dict, webhook: bool = True) -> dict:
    """`obj` as a validating admission policy sees it: canonical quantities; for a Pod, requests defaulted
    from limits and (with `webhook`) HAMi's mutation (hami_webhook), after which the API server defaults the
    object again (apiserver webhook/mutating/dispatcher.go: Default after the patch), so the card count the
    webhook adds to the limits reaches the requests too."""
    obj = _defaulted(obj)
    if webhook and obj.get("kind") == "Pod":
        obj = _defaulted(hami_webhook(obj))
    return obj


def _defaulted(obj: dict) -> dict:
    """Canonical quantities, and a Pod's requests defaulted from its limits (SetDefaults_Pod; not a template's)."""
    obj = copy.deepcopy(obj)
    is_pod = obj.get("kind") == "Pod"
    for container in _containers(_pod_spec(obj) or {}):
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            if isinstance(resources.get(section), dict):
                resources[section] = {k: canonical_quantity(str(v)) for k, v in resources[section].items()}
        if is_pod and resources:
            requests = resources.setdefault("requests", {})
            for key, value in (resources.get("limits") or {}).items():
                requests.setdefault(key, value)
    return obj


def _containers(spec: dict, fields: tuple[str, ...] = ("containers", "initContainers")) -> list[dict]:
    return [container for field in fields for container in spec.get(field) or []]


def hami_webhook(obj: dict) -> dict:
    """A Pod as HAMi's mutating webhook leaves it (pkg/device/nvidia/device.go MutateAdmission): an app
    container that asks memory or cores but no card count gets `nvidia.com/gpu: 1` in its limits, and a pod
    asking any GPU resource gets schedulerName hami-scheduler. Other kinds pass unchanged."""
    obj = copy.deepcopy(obj)
    if obj.get("kind") != "Pod":
        return obj
    spec = obj.get("spec") or {}
    for container in _containers(spec, ("containers",)):
        limits = (container.get("resources") or {}).get("limits") or {}
        if any(key in limits for key in HAMI_KEYS[1:]) and "nvidia.com/gpu" not in limits:
            limits["nvidia.com/gpu"] = "1"
    if any(key in ((c.get("resources") or {}).get("limits") or {}) for c in _containers(spec) for key in HAMI_KEYS):
        spec["schedulerName"] = "hami-scheduler"
    return obj


@dataclass
class Outcome:
    failed: list[str]  # messages of the validations that did not hold (or raised), in validation order
    errors: list[str]  # the ones that raised
    matched: bool = True  # False: a matchCondition excluded the request, nothing was judged

    @property
    def shown(self) -> str | None:
        """What kubectl shows: the first failing validation's message."""
        return self.failed[0] if self.failed else None


def _cel(value: Any) -> Any:
    return celpy.json_to_cel(value)


def run_policy(policy: dict, obj: dict, old: dict | None = None, operation: str = "CREATE") -> Outcome:
    """The messages of `policy`'s validations that `obj` fails, as the API server would judge the request
    (matchConditions first; `old` is `oldObject` on UPDATE). Pass objects through `admitted()` first."""
    # Judging is a function of the request alone, and cel-python takes ~0.1 CPU-s per request: tests that
    # ask again about the same request (a fixture in several tests, a check repeated) get the first answer.
    key = json_key([policy, obj, old, operation])
    if key is None or key not in _JUDGED:
        outcome = _run_policy(policy, obj, old, operation)
        if key is None:
            return outcome
        _JUDGED[key] = outcome
    return copy.deepcopy(_JUDGED[key])


_JUDGED: dict[str, Outcome] = {}


def _run_policy(policy: dict, obj: dict, old: dict | None, operation: str) -> Outcome:
    activation: dict[str, Any] = {
        "object": _cel(obj),
        "oldObject": _cel(old),
        "request": _cel({"operation": operation}),
    }
    for condition in policy["spec"].get("matchConditions", []):
        try:
            if not bool(evaluate(condition["expression"], activation)):
                return Outcome([], [], matched=False)
        except Exception as error:
            return Outcome([f"error: matchCondition {condition['name']}: {error}"], [str(error)])
    variables: dict[str, Any] = {}
    failed, errors = [], []
    try:
        for variable in policy["spec"].get("variables", []):
            activation["variables"] = celtypes.MapType({celtypes.StringType(k): v for k, v in variables.items()})
            variables[variable["name"]] = evaluate(variable["expression"], activation)
        activation["variables"] = celtypes.MapType({celtypes.StringType(k): v for k, v in variables.items()})
    except Exception as error:
        return Outcome([f"error: {error}"], [str(error)])
    for validation in policy["spec"]["validations"]:
        try:
            holds = bool(evaluate(validation["expression"], activation))
        except Exception as error:
            failed.append(f"error: {error}")
            errors.append(str(error))
            continue
        if not holds:
            if "messageExpression" in validation:
                failed.append(str(evaluate(validation["messageExpression"], activation)))
            else:
                failed.append(validation["message"])
    return Outcome(failed, errors)
