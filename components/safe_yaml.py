"""YAML from users, read with bounds: size, aliases and nesting depth.

PyYAML's safe loader accepts an alias bomb (a few lines that expand to gigabytes once walked) and
recurses once per nesting level (100,000 `[` is a RecursionError). Real manifests and stack files are
far inside these bounds; anything outside gets a YamlError that says which bound and how to fix it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

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
        if document is not None and _expanded_size(document, {}) > MAX_NODES:
            raise YamlError(f"expands to more than {MAX_NODES} values through aliases: refused as an alias bomb")
        return document


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """Values a node stands for with every alias expanded (memoised: shared nodes are counted fast)."""
    if id(node) in sizes:
        return sizes[id(node)]
    sizes[id(node)] = MAX_NODES + 1  # a cycle (recursive alias) counts as too big
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    else:
        size = 1
    sizes[id(node)] = min(size, MAX_NODES + 1)
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


def load_all(text: str, name: str) -> list[Any]:
    """Every document of a YAML stream, within the bounds; YamlError names the file and the problem."""
    if len(text) > MAX_BYTES:
        raise YamlError(f"{name}: {len(text)} characters; at most {MAX_BYTES} are read")
    loader = _BoundedLoader(text)
    try:
        documents = []
        while loader.check_data():
            documents.append(loader.get_data())
        return documents
    except YamlError as error:
        raise YamlError(f"{name}: {error}") from None
    except yaml.YAMLError as error:
        raise YamlError(f"{name}: not valid YAML: {str(error)[:300]}") from None
    except RecursionError:
        raise YamlError(f"{name}: nested too deeply") from None
    finally:
        loader.dispose()


def load(text: str, name: str) -> Any:
    documents = load_all(text, name)
    if len(documents) > 1:
        raise YamlError(f"{name}: holds {len(documents)} YAML documents; expected one")
    return documents[0] if documents else None
