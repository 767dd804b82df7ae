"""Evaluates a ValidatingAdmissionPolicy's CEL offline, as the API server would, with cel-python.

Kubernetes' CEL adds libraries to the CEL standard; the ones the policies use are implemented here,
following their documented behaviour (k8s.io/apiserver/pkg/cel/library): `quantity(string)`,
`.isInteger()` and `.asInteger()` (false / an error for a value the API server holds as an inf.Dec, however
small: see _held), `.isGreaterThan()`, the lists library's `.sum()` and `.max()`, and the strings library's
`.split(sep)`, `.join(sep)`, `.trim()` and `.upperAscii()`. A validation whose expression raises an error counts as
failed, as with `failurePolicy: Fail`.

What reaches a policy is not what the user wrote (`admitted`): the API server stores quantities in
canonical form unless the text already looks canonical (canonical_quantity: 20000 -> "20k", 81920 ->
"81920", "1024Mi" -> "1Gi", but "30e0" stays), defaults a Pod's requests from its limits (SetDefaults_Pod;
not a template's) and every pod spec's schedulerName (default-scheduler), and HAMi's mutating webhook has set a
GPU Pod's schedulerName and `nvidia.com/gpu: 1` where only memory or cores were asked, after which the Pod is
defaulted again. `run_policy` returns the
failures in validation order: the API server shows only the first (dispatcher.go, deniedDecisions[0]).
tests/real compares all of this with the real API server (`make test-real`).
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes
from shared_data import json_key

from model.quantity import BINARY_SI, INT64_MAX, QuantityError, parse_quantity


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    # What Quantity.AsInt64() answers, which `isInteger()`/`asInteger()` use (apiserver pkg/cel/library/quantity.go):
    # None unless the API server holds the value as an int64 with a scale >= 0 that fits (see _held).
    int64: int | None


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise ValueError(f"quantity() takes a string, not {type(text).__name__}")
    return _parsed(str(text))


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Quantity:
    try:
        value = _value(text)
    except QuantityError as error:
        raise ValueError(f"quantities must match the regular expression: {error}") from None
    held = _held(text)
    if held is None or held.scale < 0 or abs(held.value * 10**held.scale) > INT64_MAX:
        return Quantity(value, None)
    return Quantity(value, held.value * 10**held.scale)


def _value(text: str) -> Fraction:
    """The value ParseQuantity gives `text`: exact, except that a binary one beyond int64 is capped to it ("8Ei"
    reads 9223372036854775807: `The max is just a simple cap`, apimachinery quantity.go)."""
    value = parse_quantity(text)
    if _number_and_suffix(text)[1] in BINARY_SI and abs(value) > INT64_MAX:
        return INT64_MAX if value > 0 else -INT64_MAX
    return Fraction(value)


@dataclass(frozen=True)
class _Held:
    """A quantity the API server holds as an int64 (value x 10^scale), and whether it keeps the text as written."""

    value: int
    scale: int
    kept: bool


DECIMAL_EXPONENTS = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def _held(text: str) -> _Held | None:
    """How apimachinery's ParseQuantity holds `text` (pkg/api/resource/quantity.go): as an int64 only on its fast
    path (at most 18 digits for a decimal value, fewer under a large binary suffix, a scale down to nano),
    else as an inf.Dec (None), whose AsInt64() fails whatever the value: `isInteger()` is false for "1Pi"
    and for 9223372036854775807. On the fast path the text is kept as written when it looks canonical
    (a decimal scale that is a multiple of 3, no leading zero, no trailing "000"; a binary mantissa that is
    not a multiple of 8): "030k", "+1" and "30e0" stay as they are."""
    if text == "0":
        return _Held(0, 0, kept=True)
    number, suffix = _number_and_suffix(text)
    unsigned = number.lstrip("+-")
    whole, _, denom = unsigned.partition(".")
    num = whole.lstrip("0") or "0"
    sign = -1 if number.startswith("-") else 1
    if suffix in BINARY_EXPONENTS:
        exponent = BINARY_EXPONENTS[suffix]
        if denom or 15 - len(num) - exponent * 3 // 10 - 1 < 0 or int(num) << exponent > INT64_MAX:
            return None
        return _Held(sign * (int(num) << exponent), 0, kept=int(num) & 7 != 0)
    exponent = DECIMAL_EXPONENTS[suffix] if suffix in DECIMAL_EXPONENTS else int(suffix[1:])
    shifted, scale = num + denom, exponent - len(denom)
    if 18 - len(shifted) < 0 or scale < -9:
        return None
    return _Held(sign * int(shifted), scale, kept=scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0")


def _number_and_suffix(text: str) -> tuple[str, str]:
    """(number, suffix) of a quantity string; the suffix includes an exponent (`e3`)."""
    index = 1 if text[:1] in ("+", "-") else 0
    while index < len(text) and (text[index].isdigit() or text[index] == "."):
        index += 1
    return text[:index], text[index:]


def _as_integer(quantity: Quantity) -> celtypes.IntType:
    if quantity.int64 is None:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(quantity.int64)


def _is_integer(quantity: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(quantity.int64 is not None)


def _is_greater_than(quantity: Quantity, other: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(quantity.value > other.value)


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


# Go's unicode.IsSpace (the White_Space property): what cel-go's trim() strips, as strings.TrimSpace does. Not
# Python's str.strip(), which also strips U+001C-U+001F.
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


def _trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(str(text).strip(GO_SPACE))


def _upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(ch.upper() if "a" <= ch <= "z" else ch for ch in str(text)))


FUNCTIONS = {
    "quantity": _quantity,
    "asInteger": _as_integer,
    "isInteger": _is_integer,
    "isGreaterThan": _is_greater_than,
    "join": _join,
    "sum": _sum,
    "max": _max,
    "split": _split,
    "trim": _trim,
    "upperAscii": _upper_ascii,
}
_PROGRAMS: dict[str, Any] = {}


@functools.cache
def _environment() -> celpy.Environment:
    """Built on first use, not on import: it compiles CEL's grammar (lark, LALR), about 0.24 CPU-s, and every test
    worker imports this module while collecting, most without evaluating any CEL."""
    return celpy.Environment()


def _program(expression: str) -> Any:
    if expression not in _PROGRAMS:
        environment = _environment()
        _PROGRAMS[expression] = environment.program(environment.compile(expression), functions=FUNCTIONS)
    return _PROGRAMS[expression]


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    result = _program(expression).evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise ValueError(str(result.args[0]) if result.args else "CEL evaluation error")
    return result


DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in DECIMAL_EXPONENTS.items()}


def canonical_quantity(text: str) -> str:
    """The string the API server stores for a quantity. ParseQuantity keeps a text that looks canonical as
    written (_held); the defaulting of every resource list rounds a value up to milli precision
    (SetDefaults_ResourceList, RoundUp(-3)), which, like a value held as an inf.Dec, drops the text. Otherwise
    CanonicalizeBytes: the format follows the suffix written (binary, decimal exponent, else decimal SI); the
    mantissa loses trailing zeros down to an exponent that is a multiple of 3 (decimal) or of 1024 (binary,
    for whole values of at least 1024)."""
    text = text.strip()
    held = _held(text)
    if held is not None and held.kept and held.scale >= -3:
        return text
    value = _value(text)
    if value * 1000 != int(value * 1000):  # rounded up (away from zero) to milli precision
        value = Fraction(math.ceil(abs(value) * 1000), 1000) * (1 if value > 0 else -1)
    if value == 0:
        return "0"
    suffix = _number_and_suffix(text)[1]
    if suffix in BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        mantissa, power = int(value), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa, power = mantissa // 1024, power + 1
        return f"{mantissa}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}"
    exponent_form = suffix[:1] in ("e", "E")
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
    """Canonical quantities, a Pod's requests defaulted from its limits (SetDefaults_Pod; not a template's), and every
    pod spec's schedulerName, a template's too (SetDefaults_PodSpec: default-scheduler when empty)."""
    obj = copy.deepcopy(obj)
    is_pod = obj.get("kind") == "Pod"
    spec = _pod_spec(obj)
    if isinstance(spec, dict) and not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
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
    asking any GPU resource gets schedulerName hami-scheduler. Other kinds pass unchanged, and so does a Pod with
    spec.nodeName: both releases refuse it when they find a GPU resource ("pod has node assigned"), so it reaches a
    validating policy as written, let through untouched or with the webhook down (hami/webhook.py)."""
    obj = copy.deepcopy(obj)
    if obj.get("kind") != "Pod" or (obj.get("spec") or {}).get("nodeName"):
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
