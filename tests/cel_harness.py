"""Evaluates a ValidatingAdmissionPolicy's CEL offline, as the API server would, with cel-python.

Kubernetes' CEL adds libraries to the CEL standard; the ones the policies use are implemented here,
following their documented behaviour (k8s.io/apiserver/pkg/cel/library): `quantity(string)` and
`.asInteger()` (an error when the value is not an integer or overflows int64), the lists library's
`.sum()` and `.max()`, and the strings library's `.split(sep)` and `.upperAscii()`. A validation
whose expression raises an error counts as failed, as with `failurePolicy: Fail`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes

from policies.quantity import INT64_MAX, QuantityError, parse_quantity


@dataclass(frozen=True)
class Quantity:
    value: Fraction


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise ValueError(f"quantity() takes a string, not {type(text).__name__}")
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as error:
        raise ValueError(f"quantities must match the regular expression: {error}") from None


def _as_integer(quantity: Quantity) -> celtypes.IntType:
    if quantity.value.denominator != 1 or abs(quantity.value) > INT64_MAX:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(quantity.value))


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


@dataclass
class Outcome:
    failed: list[str]  # messages of the validations that did not hold (or raised)
    errors: list[str]  # the ones that raised


def run_policy(policy: dict, obj: dict) -> Outcome:
    """The messages of `policy`'s validations that `obj` fails."""
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj)}
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
