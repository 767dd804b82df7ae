"""tools/programs.toml, read: each program's wrapper module, build settings and version check, and the pins the
wrappers' go.mod files hold. Standard library only (make tools runs before ./venv exists)."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent / "programs.toml"
# The oldest Go that builds every wrapper (the highest `go` line among their go.mod files).
REQUIRE = re.compile(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)", re.MULTILINE)
GO_LINE = re.compile(r"^go\s+(\d+)\.(\d+)(?:\.(\d+))?\s*$", re.MULTILINE)
VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Program:
    name: str
    wrapper: str
    package: str
    version_args: tuple[str, ...]
    expect: str
    cgo: bool
    tags: tuple[str, ...]
    ldflags: tuple[str, ...]
    source: str
    # The release a pseudo-version pin is (for the placeholders); "" when the pin is the release itself.
    release: str = ""
    # "run": `program VERSION_ARGS` prints `expect`; "buildinfo": `go version -m` shows the pinned module (it has
    # no -ldflags for a -trimpath build, golang/go#52372) and the program's bytes hold each of `contains`.
    check: str = "run"
    contains: tuple[str, ...] = ()
    # go:embed files upstream generates before building: {"generator": PATH, "dir": PATH, "env": {...},
    # "outputs": [...]}, paths inside the source module.
    generate: dict = field(default_factory=dict)
    # Which make target builds it: "tools" (`make tools`) or "lab-images" (`make lab-images`, the Docker lab's
    # images of programs the Go module proxy serves). Left at its default, it is not part of the build key.
    group: str = "tools"


@dataclass(frozen=True)
class ModuleFile:
    """A file copied out of a pinned module's zip into bin/ (a script a program runs beside it)."""

    name: str
    wrapper: str
    module: str
    path: str
    mode: int = 0o755
    group: str = "tools"  # files are all of `make tools`


def load_manifest(path: Path = MANIFEST) -> tuple[list[Program | ModuleFile], dict[str, str]]:
    data = tomllib.loads(path.read_text())
    unavailable = dict(data.pop("unavailable", {}))
    programs: list[Program | ModuleFile] = []
    for wrapper, table in data.items():
        for name, entry in table.get("files", {}).items():
            programs.append(ModuleFile(name=name, wrapper=wrapper, module=entry["module"], path=entry["path"]))
        for name, entry in table.get("programs", {}).items():
            programs.append(
                Program(
                    name=name,
                    wrapper=wrapper,
                    package=entry["package"],
                    version_args=tuple(entry.get("version_args", ())),
                    expect=entry.get("expect", ""),
                    cgo=bool(table.get("cgo", False)),
                    tags=tuple(table.get("tags", ())),
                    ldflags=tuple(table.get("ldflags", ())),
                    source=table["source"],
                    release=table.get("release", ""),
                    check=entry.get("check", "run"),
                    contains=tuple(entry.get("contains", ())),
                    generate=dict(table.get("generate", {})),
                    group=table.get("group", "tools"),
                )
            )
    return programs, unavailable


def required_version(go_mod: str, module: str) -> str:
    """The version a wrapper's go.mod requires of `module` (its pin)."""
    for path, version in REQUIRE.findall(go_mod.split("\nreplace", 1)[0]):
        if path == module:
            return version
    raise ValueError(f"go.mod does not require {module}")


def go_line(go_mod: str) -> tuple[int, int, int]:
    match = GO_LINE.search(go_mod)
    if not match:
        raise ValueError("go.mod has no `go` line")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def placeholders(version: str, date: str) -> dict[str, str]:
    match = VERSION.match(version)
    if not match:
        raise ValueError(f"{version} is not a release version vMAJOR.MINOR.PATCH")
    return {"version": version, "semver": version[1:], "major": match[1], "minor": match[2], "date": date}


def key_fields(item: Program | ModuleFile) -> dict[str, object]:
    """The item's fields, without those left at their default: a field added to the manifest's schema does not
    change the key of a program that does not use it (so it is not rebuilt)."""
    values = {}
    for spec in dataclasses.fields(item):
        value = getattr(item, spec.name)
        default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
        if value != default:
            values[spec.name] = value
    return values
