"""Kubernetes resource quantities, parsed by the grammar in k8s.io/apimachinery `resource/quantity.go`:

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <sign><numericValue> | <numericValue>
    <numericValue>    ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

Values are exact (Fraction), so `1e9`, `1T` and `1Pi` read as the integers Kubernetes stores. The input
size is bounded (a 400-digit number or `1e999999999` is refused at once, not computed).
"""

from __future__ import annotations

from fractions import Fraction

BINARY_SI = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL_SI = {"m": Fraction(1, 1000), "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
MAX_LENGTH = 64  # far longer than any real quantity
MAX_EXPONENT = 30  # |exponent| beyond this is out of any resource's range anyway
INT64_MAX = 2**63 - 1


class QuantityError(ValueError):
    pass


def _digits(text: str) -> bool:
    return text != "" and all("0" <= ch <= "9" for ch in text)


def _split_number(text: str) -> tuple[str, str]:
    """The longest prefix that is a <signedNumber>, and the rest (the suffix)."""
    index = 1 if text[:1] in ("+", "-") else 0
    while index < len(text) and ("0" <= text[index] <= "9" or text[index] == "."):
        index += 1
    return text[:index], text[index:]


def _number(text: str) -> Fraction:
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if text[:1] in ("+", "-") else text
    whole, dot, fraction = body.partition(".")
    if dot and whole == "" and fraction == "":
        raise QuantityError("a number needs digits")
    if (whole and not _digits(whole)) or (fraction and not _digits(fraction)) or (not whole and not dot):
        raise QuantityError("a number needs digits")
    value = Fraction(int(whole or "0"))
    if fraction:
        value += Fraction(int(fraction), 10 ** len(fraction))
    return sign * value


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string; QuantityError names what is wrong."""
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"is {len(text)} characters long; no resource quantity is longer than {MAX_LENGTH}")
    if text == "":
        raise QuantityError("is empty")
    number, suffix = _split_number(text)
    if number in ("", "+", "-"):
        raise QuantityError("does not start with a number")
    value = _number(number)
    if suffix in BINARY_SI:
        return value * BINARY_SI[suffix]
    if suffix in DECIMAL_SI:
        return value * DECIMAL_SI[suffix]
    if suffix[:1] in ("e", "E"):
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
        if not _digits(digits):
            raise QuantityError(f"has an exponent {suffix!r} that is not a whole number")
        power = int(exponent)
        if abs(power) > MAX_EXPONENT:
            raise QuantityError(f"has exponent {power}, out of range")
        return value * Fraction(10) ** power
    raise QuantityError(f"has an unknown suffix {suffix!r} (Ki Mi Gi Ti Pi Ei, m k M G T P E, or e<exponent>)")


def suffix_of(text: str) -> str:
    """The unit suffix of a quantity string ('' for a plain number or an exponent)."""
    _, suffix = _split_number(text)
    return "" if suffix[:1] in ("e", "E") and suffix not in DECIMAL_SI else suffix


def canonical_whole(value: int) -> str:
    """How the API server writes a whole number it read without a suffix (a DecimalSI quantity) back: the
    largest SI suffix that leaves a whole mantissa, so 20000 comes back as `20k` and 81920 as `81920`
    (k8s.io/apimachinery resource/quantity.go `CanonicalizeBytes`: the exponent a multiple of 3). For values within
    int64, as every quota and limit of the config is."""
    suffixes = ("", "k", "M", "G", "T", "P", "E")
    step = 0
    while value and value % 1000 == 0 and step < len(suffixes) - 1:
        value //= 1000
        step += 1
    return f"{value}{suffixes[step]}"
