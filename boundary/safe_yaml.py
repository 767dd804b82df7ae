"""YAML from users, read with bounds: size, aliases and nesting depth.

PyYAML's safe loader accepts an alias bomb (a few lines that expand to gigabytes once walked) and
recurses once per nesting level (100,000 `[` is a RecursionError). Real manifests and stack files are
far inside these bounds; anything outside gets a YamlError that says which bound and how to fix it.

Every YamlError is one line that names the file, the line and column, and the problem, but never
quotes the offending text (PyYAML's own message prints the line, which may hold a pasted key).

Stack files are read as the Pulumi CLI reads them (`load_stack`): gopkg.in/yaml.v3, through
sdk/go/common/encoding/marshal.go. That decoder refuses duplicate keys (decode.go, `uniqueKeys`) and
resolves plain scalars by YAML 1.2 rules (resolve.go): `yes`, `on`, `no` are strings, `0o17` and
`017` are octal, `1:30` is a string. PyYAML's YAML 1.1 rules would read some of them differently, so
`make plan` would validate another config than `pulumi up` runs.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from boundary.redact import scrub

MAX_BYTES = 10 * 2**20  # 10 MiB of YAML
MAX_ALIASES = 100  # *references to anchors, per stream
MAX_DEPTH = 64  # nested mappings/sequences
MAX_NODES = 1_000_000  # scalars and collections once aliases are expanded


class YamlError(ValueError):
    pass


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlError(f"more than {MAX_ALIASES} aliases (*name): refused as a possible alias bomb")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlError(f"nested more than {MAX_DEPTH} levels deep")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        document = super().compose_document()
        if document is not None:
            values, characters = _expanded_size(document, {})
            if values > MAX_NODES:
                raise YamlError(f"expands to more than {MAX_NODES} values through aliases: refused as an alias bomb")
            if characters > MAX_BYTES:
                # Without aliases a document holds no more characters than its file; aliases may not make it
                # larger than the largest file read (a long value aliased many times is slow to validate).
                raise YamlError(
                    f"aliases (*name) expand it to more than {MAX_BYTES} characters, more than a file gpulab "
                    "reads: refused as an alias bomb; alias shorter values, or fewer times"
                )
        return document


_TOO_BIG = (MAX_NODES + 1, MAX_BYTES + 1)


def _expanded_size(node: yaml.Node, sizes: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, characters of scalars) a node stands for with every alias expanded (memoised: shared nodes are
    counted fast)."""
    if id(node) in sizes:
        return sizes[id(node)]
    sizes[id(node)] = _TOO_BIG  # a cycle (recursive alias) counts as too big
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    else:
        children = []
    values, characters = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
    for child in children:
        child_values, child_characters = _expanded_size(child, sizes)
        values, characters = values + child_values, characters + child_characters
    sizes[id(node)] = (min(values, _TOO_BIG[0]), min(characters, _TOO_BIG[1]))
    return sizes[id(node)]


def read_text(path: Path) -> str:
    """A file's text, bounded in size and required to be UTF-8."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise YamlError(f"{path}: {size} bytes; at most {MAX_BYTES} are read")
        data = path.read_bytes()
    except OSError as error:
        raise YamlError(f"{path}: cannot read it ({error.strerror})") from None
    return decode(data, str(path))


def decode(data: bytes, name: str) -> str:
    if len(data) > MAX_BYTES:
        raise YamlError(f"{name}: {len(data)} bytes; at most {MAX_BYTES} are read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise YamlError(f"{name}: not UTF-8 text (byte {error.start})") from None


def _where(mark: yaml.Mark | None) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def syntax_error(name: str, error: yaml.YAMLError) -> YamlError:
    """One line: the file, where, and PyYAML's problem, without the snippet of the offending line."""
    if isinstance(error, yaml.MarkedYAMLError):
        problem = " ".join(part for part in (error.problem, error.context) if part) or "unreadable"
        mark = error.problem_mark or error.context_mark
        return YamlError(f"{name}: not valid YAML{_where(mark)}: {scrub(problem.replace(chr(10), ' '), 160)}")
    return YamlError(f"{name}: not valid YAML: {scrub(str(error).splitlines()[0] if str(error) else '?', 160)}")


def _load(loader_class: type[_BoundedLoader], text: str, name: str) -> list[Any]:
    if len(text) > MAX_BYTES:
        raise YamlError(f"{name}: {len(text)} characters; at most {MAX_BYTES} are read")
    loader = loader_class(text)
    try:
        documents = []
        while loader.check_data():
            documents.append(loader.get_data())
        return documents
    except YamlError as error:
        raise YamlError(f"{name}: {error}") from None
    except yaml.YAMLError as error:
        raise syntax_error(name, error) from None
    except RecursionError:
        raise YamlError(f"{name}: nested too deeply") from None
    finally:
        loader.dispose()


def load_all(text: str, name: str) -> list[Any]:
    """Every document of a YAML stream, within the bounds; YamlError names the file and the problem."""
    return _load(_BoundedLoader, text, name)


def load(text: str, name: str) -> Any:
    documents = load_all(text, name)
    if len(documents) > 1:
        raise YamlError(f"{name}: holds {len(documents)} YAML documents; expected one")
    return documents[0] if documents else None


# --- Stack files, read as the Pulumi CLI reads them (gopkg.in/yaml.v3 v3.0.1) ---

_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULL = {"", "~", "null", "Null", "NULL"}
_SPECIAL_FLOAT = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# strconv.ParseInt(s, 0, 64) after yaml.v3 strips every `_`: 0x hex, 0o or a leading 0 octal, 0b binary.
_GO_INT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # resolve.go yamlStyleFloat
_TIMESTAMP = re.compile(r"[0-9]{4}-")


def go_yaml_scalar(text: str) -> Any:
    """What yaml.v3 makes of a plain (unquoted) scalar when decoding into `any` (resolve.go `resolve`)."""
    if text in _BOOL:
        return _BOOL[text]
    if text in _NULL:
        return None
    if text in _SPECIAL_FLOAT:
        return _SPECIAL_FLOAT[text]
    first = text[0]
    if first == ".":
        return float(text) if re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", text) else text
    if not (first.isascii() and (first.isdigit() or first in "+-")):
        return text  # `yes`, `on`, `no`, `off` and every other word: a string
    if _TIMESTAMP.match(text):
        return text  # yaml.v3 makes a time.Time of it; no gpulab key takes one, so a string is as good
    plain = text.replace("_", "")
    if _GO_INT.fullmatch(plain):
        sign = -1 if plain[0] == "-" else 1
        digits = plain.lstrip("+-")
        if digits[:2].lower() in ("0x", "0o", "0b"):
            base, body = {"x": 16, "o": 8, "b": 2}[digits[1].lower()], digits[2:]
        else:
            base, body = (8 if len(digits) > 1 and digits[0] == "0" else 10), digits
        value = sign * int(body, base)
        if -(2**63) <= value < 2**64:
            return value
    if _GO_FLOAT.fullmatch(plain):
        return float(plain)
    return text


class _StackLoader(_BoundedLoader):
    """The bounded loader with yaml.v3's duplicate-key refusal and scalar resolution."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, yaml.Mark] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    if key_node.value in seen:
                        first = seen[key_node.value]
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"key {key_node.value!r} is already set at line {first.line + 1} (the Pulumi CLI refuses "
                            "duplicate keys); keep one",
                            key_node.start_mark,
                        )
                    seen[key_node.value] = key_node.start_mark
        return super().construct_mapping(node, deep)

    def resolve(self, kind, value, implicit):
        # A plain scalar without an explicit tag is resolved by yaml.v3's rules (the `<<` merge key stays).
        if kind is yaml.ScalarNode and implicit[0] and value != "<<":
            return _GO_PLAIN
        return super().resolve(kind, value, implicit)

    def construct_go_plain(self, node):
        return go_yaml_scalar(node.value)


_GO_PLAIN = "tag:gpulab,2026:go-yaml-v3-plain"
_StackLoader.add_constructor(_GO_PLAIN, _StackLoader.construct_go_plain)


def load_stack(text: str, name: str) -> Any:
    """A stack file's one document, as the Pulumi CLI reads it (see the module docstring)."""
    documents = _load(_StackLoader, text, name)
    if len(documents) > 1:
        raise YamlError(f"{name}: holds {len(documents)} YAML documents; expected one")
    return documents[0] if documents else None
