"""`make tools`: build the real upstream programs from the pinned wrapper Go modules in tools/ into ./bin.

Only the Go module proxy is used (the Go tools verify every module against go.sum). A program is rebuilt
only when its wrapper's go.mod/go.sum, its entry in tools/programs.toml or the Go toolchain changed: the
key of each build is kept in bin/.tools/NAME.key. Every built program must report its pinned version.

Exit codes: 0 all built or up to date, 1 a build failed, 2 Go or the module proxy is missing (one line).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
MANIFEST = TOOLS / "programs.toml"
# The oldest Go that builds every wrapper (the highest `go` line among their go.mod files).
REQUIRE = re.compile(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)", re.MULTILINE)
GO_LINE = re.compile(r"^go\s+(\d+)\.(\d+)(?:\.(\d+))?\s*$", re.MULTILINE)
VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)")


class ToolsError(Exception):
    """A problem the user fixes outside gpulab (Go missing, proxy unreachable): one line, exit 2."""


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


def say(message: str) -> None:
    print(f"[tools] {message}", file=sys.stderr, flush=True)


def load_manifest(path: Path = MANIFEST) -> tuple[list[Program], dict[str, str]]:
    data = tomllib.loads(path.read_text())
    unavailable = dict(data.pop("unavailable", {}))
    programs = []
    for wrapper, table in data.items():
        for name, entry in table["programs"].items():
            programs.append(
                Program(
                    name=name,
                    wrapper=wrapper,
                    package=entry["package"],
                    version_args=tuple(entry["version_args"]),
                    expect=entry["expect"],
                    cgo=bool(table.get("cgo", False)),
                    tags=tuple(table.get("tags", ())),
                    ldflags=tuple(table.get("ldflags", ())),
                    source=table["source"],
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


def go_version(go: str) -> tuple[str, tuple[int, int, int]]:
    """`go1.26.8` and (1, 26, 8); ToolsError when there is no usable go."""
    if shutil.which(go) is None:
        raise ToolsError(
            f"`{go}` not found: make tools builds the real programs from Go modules and needs Go 1.26 or newer "
            "(install it, or set GO=/path/to/go); make test does not need Go"
        )
    result = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60)
    text = result.stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)(?:\.(\d+))?", text)
    if result.returncode != 0 or not match:
        raise ToolsError(f"`{go} env GOVERSION` did not answer with a Go version: {(result.stderr or text)[:200]}")
    return text, (int(match[1]), int(match[2]), int(match[3] or 0))


def build_key(program: Program, go_text: str, wrapper_dir: Path) -> str:
    digest = hashlib.sha256()
    for part in (
        json.dumps(program.__dict__, sort_keys=True),
        go_text,
        os.environ.get("GOOS", ""),
        os.environ.get("GOARCH", ""),
        (wrapper_dir / "go.mod").read_text(),
        (wrapper_dir / "go.sum").read_text(),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def run_go(go: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([go, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def module_time(go: str, wrapper_dir: Path, module: str, env: dict[str, str]) -> str:
    """The proxy's Time of the pinned module version (the release's commit time): downloads the wrapper's
    modules first, so a missing proxy is reported here, in one line, before any compiler runs."""
    download = run_go(go, ["mod", "download"], wrapper_dir, env, timeout=1800)
    if download.returncode != 0:
        # go prints a "go: downloading M V" line per module before the error itself.
        errors = [line for line in download.stderr.splitlines() if line.strip() and "go: downloading " not in line]
        first = errors[0] if errors else "no message"
        raise ToolsError(
            f"could not download the modules of tools/{wrapper_dir.name} (GOPROXY={env.get('GOPROXY') or 'default'}): "
            f"{first[:300]}. make tools needs the Go module proxy; make test does not"
        )
    listed = run_go(go, ["list", "-m", "-json", module], wrapper_dir, env, timeout=300)
    if listed.returncode != 0:
        raise ToolsError(f"`go list -m {module}` failed in tools/{wrapper_dir.name}: {listed.stderr.strip()[:300]}")
    time_value = json.loads(listed.stdout).get("Time", "")
    return time_value or "1970-01-01T00:00:00Z"


def build(
    program: Program, go: str, wrapper_dir: Path, bin_dir: Path, env: dict[str, str], date: str, version: str
) -> None:
    values = placeholders(version, date)
    ldflags = " ".join(flag.format(**values) for flag in program.ldflags)
    partial = bin_dir / f".{program.name}.partial"
    args = ["build", "-trimpath", "-o", str(partial)]
    if program.tags:
        args += ["-tags", ",".join(program.tags)]
    if ldflags:
        args += ["-ldflags", ldflags]
    args.append(program.package)
    build_env = dict(env, CGO_ENABLED="1" if program.cgo else "0")
    result = run_go(go, args, wrapper_dir, build_env, timeout=3600)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"go build {program.package} failed in tools/{wrapper_dir.name}:\n{tail}")
    expected = program.expect.format(**values)
    shown = subprocess.run([str(partial), *program.version_args], capture_output=True, text=True, timeout=60)
    answer = (shown.stdout + shown.stderr).strip()
    if expected not in answer:
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"{program.name} {' '.join(program.version_args)} printed {answer[:200]!r}, not {expected!r}: "
            "its version variables (ldflags in tools/programs.toml) no longer match upstream's"
        )
    partial.replace(bin_dir / program.name)


def disk_usage(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) if path.exists() else 0


def megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make tools", description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=ROOT / "bin", help="where the programs go (default ./bin)")
    parser.add_argument("--go", default=os.environ.get("GO", "go"), help="the go command (default: go on PATH)")
    parser.add_argument("--tools", type=Path, default=TOOLS, help="the wrapper modules and programs.toml")
    parser.add_argument("only", nargs="*", help="build only these programs (default: all)")
    args = parser.parse_args(argv)
    programs, unavailable = load_manifest(args.tools / "programs.toml")
    known = {p.name for p in programs}
    unknown = [name for name in args.only if name not in known]
    if unknown:
        say(f"unknown program {', '.join(unknown)}; the programs are: {', '.join(sorted(known))}")
        return 2
    selected = [p for p in programs if not args.only or p.name in args.only]

    started = time.monotonic()
    keys_dir = args.bin / ".tools"
    keys_dir.mkdir(parents=True, exist_ok=True)
    # Two `make tools` at once: the second waits for the first, then finds everything up to date.
    with open(keys_dir / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another `make tools` is building into this bin/; waiting for it to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            go_text, go_tuple = go_version(args.go)
            needed = max(go_line((args.tools / w / "go.mod").read_text()) for w in {p.wrapper for p in selected})
            if go_tuple < needed:
                raise ToolsError(
                    f"{go_text} is older than go{'.'.join(map(str, needed))}, which the wrappers in tools/ need: "
                    "install a newer Go, or let it fetch one (GOTOOLCHAIN=auto)"
                )
            built = build_all(selected, args.go, args.bin, args.tools, go_text)
        except ToolsError as problem:
            say(str(problem))
            return 2
        except RuntimeError as failure:
            say(str(failure))
            return 1
    for name, reason in sorted(unavailable.items()):
        if not args.only:
            say(f"not built here: {name}: {reason} (see tools/README.md)")
    elapsed = time.monotonic() - started
    summary = (
        f"{len(selected)} programs in {args.bin}: {built} built, {len(selected) - built} up to date, "
        f"in {elapsed:.0f} s; {megabytes(disk_usage(args.bin))} on disk"
    )
    if built:
        # Where, not how big: measuring a module cache of gigabytes takes longer than a warm build.
        caches = [
            f"{name} {run_go(args.go, ['env', name], ROOT, dict(os.environ), 60).stdout.strip()}"
            for name in ("GOMODCACHE", "GOCACHE")
        ]
        summary += f"; Go caches: {', '.join(caches)} (remove with `go clean -modcache -cache`)"
    say(summary)
    return 0


def build_all(programs: list[Program], go: str, bin_dir: Path, tools: Path, go_text: str) -> int:
    # go.sum must already hold every checksum (-mod=readonly); our own repository's commit is not stamped
    # into the programs (-buildvcs=false), so a gpulab commit never changes what was built.
    env = dict(os.environ, GOFLAGS=f"{os.environ.get('GOFLAGS', '')} -mod=readonly -buildvcs=false".strip())
    dates: dict[str, tuple[str, str]] = {}
    built = 0
    for program in programs:
        wrapper_dir = tools / program.wrapper
        key = build_key(program, go_text, wrapper_dir)
        key_file = bin_dir / ".tools" / f"{program.name}.key"
        version = required_version((wrapper_dir / "go.mod").read_text(), program.source)
        if (bin_dir / program.name).exists() and key_file.exists() and key_file.read_text() == key:
            say(f"{program.name} {version}: up to date")
            continue
        if program.wrapper not in dates:
            dates[program.wrapper] = (version, module_time(go, wrapper_dir, program.source, env))
        say(f"{program.name} {version}: building from tools/{program.wrapper}")
        start = time.monotonic()
        build(program, go, wrapper_dir, bin_dir, env, dates[program.wrapper][1], version)
        key_file.write_text(key)
        built += 1
        say(f"{program.name} {version}: built in {time.monotonic() - start:.0f} s")
    return built


if __name__ == "__main__":
    sys.exit(main())
