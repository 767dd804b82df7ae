"""`make tools`: build the real upstream programs from the pinned wrapper Go modules in tools/ into ./bin.

Only the Go module proxy is used (the Go tools verify every module against go.sum). A program is rebuilt
only when its wrapper's go.mod/go.sum, its entry in tools/programs.toml or the Go toolchain changed: the
key of each build is kept in bin/.tools/NAME.key. Every built program must report its pinned version (its
own `--version`, or, for a program that prints none, the pinned module version in its Go build info).

Besides `go build` (why: tools/README.md): `files` are copied out of a pinned module's zip once its hash equals
go.sum's; `generate` unpacks such a zip into .cache/tools/WRAPPER/module, runs upstream's generator there and
builds from that copy (-modfile with a replace), for go:embed files upstream generates and does not publish.
Exit codes: 0 all built or up to date, 1 a build failed or hung (one line), 2 Go or the proxy is missing.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from boundary.bounded_run import run_text  # standard library only, as this file: no ./venv yet
from boundary.downloads import connect_timeout, download_timeout
from tools import releases
from tools.manifest import (
    ModuleFile,
    Program,
    go_line,
    key_fields,
    load_manifest,
    placeholders,
    required_version,
)

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
CACHE = ROOT / ".cache" / "tools"
GO_CACHES = ("GOMODCACHE", "GOCACHE")


class ToolsError(Exception):
    """A problem the user fixes outside gpulab (Go missing, proxy unreachable): one line, exit 2."""


def say(message: str) -> None:
    print(f"[tools] {message}", file=sys.stderr, flush=True)


def go_version(go: str) -> tuple[str, tuple[int, int, int]]:
    """`go1.26.8` and (1, 26, 8); ToolsError when there is no usable go."""
    if shutil.which(go) is None:
        raise ToolsError(
            f"`{go}` not found: make tools builds the real programs from Go modules and needs Go 1.26 or newer "
            "(install it, or set GO=/path/to/go); make test does not need Go"
        )
    result = run_text([go, "env", "GOVERSION"], 60)
    text = result.stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)(?:\.(\d+))?", text)
    if result.returncode != 0 or not match:
        raise ToolsError(f"`{go} env GOVERSION` did not answer with a Go version: {(result.stderr or text)[:200]}")
    return text, (int(match[1]), int(match[2]), int(match[3] or 0))


def build_key(program: Program | ModuleFile, go_text: str, wrapper_dir: Path) -> str:
    digest = hashlib.sha256()
    for part in (
        json.dumps(key_fields(program), sort_keys=True),
        go_text,
        os.environ.get("GOOS", ""),
        os.environ.get("GOARCH", ""),
        (wrapper_dir / "go.mod").read_text(),
        (wrapper_dir / "go.sum").read_text(),
        # gpulab's own program keeps its source beside its go.mod (an upstream wrapper has none: its key stays).
        *(f"{path.name}\0{path.read_text()}" for path in sorted(wrapper_dir.glob("*.go"))),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def run_go(go: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    # The compilers too are stopped at the deadline (a group); a hang is Unfinished, a RuntimeError: exit 1.
    return run_text([go, *args], timeout, env=env, cwd=cwd)


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


def go_sum_hash(go_sum: str, module: str, version: str) -> str:
    """The h1 hash go.sum holds for MODULE VERSION's zip (not its go.mod line)."""
    for line in go_sum.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == module and parts[1] == version:
            return parts[2]
    raise RuntimeError(f"go.sum holds no hash of {module} {version}")


def zip_h1(zip_path: Path) -> str:
    """Go's h1 hash of a module zip (golang.org/x/mod/sumdb/dirhash, Hash1 over HashZip's file list): base64 of
    the SHA-256 of the lines `SHA256HEX  NAME\n`, one per file, sorted by name."""
    summary = hashlib.sha256()
    with zipfile.ZipFile(zip_path) as archive:
        for name in sorted(info.filename for info in archive.infolist()):
            if "\n" in name:
                raise RuntimeError(f"{zip_path}: a file name with a newline ({name!r})")
            summary.update(f"{hashlib.sha256(archive.read(name)).hexdigest()}  {name}\n".encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def module_zip(go: str, wrapper_dir: Path, module: str, version: str, env: dict[str, str]) -> Path:
    """The zip of MODULE@VERSION in Go's module cache, once its h1 hash equals the one in the wrapper's go.sum
    (Go checks that when it downloads; this checks the zip as it is now, before anything is read from it)."""
    download = run_go(go, ["mod", "download", "-json", f"{module}@{version}"], wrapper_dir, env, timeout=1800)
    try:
        info = json.loads(download.stdout)
    except json.JSONDecodeError:
        info = {}
    if download.returncode != 0 or info.get("Error") or not info.get("Zip"):
        problem = info.get("Error") or download.stderr.strip() or "no answer"
        raise ToolsError(f"could not download {module}@{version} in tools/{wrapper_dir.name}: {problem[:300]}")
    expected = go_sum_hash((wrapper_dir / "go.sum").read_text(), module, version)
    zip_path = Path(info["Zip"])
    actual = zip_h1(zip_path)
    if actual != expected:
        raise RuntimeError(
            f"{zip_path} hashes to {actual}, but tools/{wrapper_dir.name}/go.sum says {module} {version} is "
            f"{expected}: the module cache holds something else than that release (`go clean -modcache`)"
        )
    return zip_path


def extract_module(zip_path: Path, module: str, version: str, dest: Path) -> None:
    """Unpack the module zip into DEST (emptied first), writable, without the `MODULE@VERSION/` prefix."""
    prefix = f"{module}@{version}/"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        for info in archive.infolist():
            relative = info.filename.removeprefix(prefix)
            parts = Path(relative).parts
            if not info.filename.startswith(prefix) or relative.startswith("/") or ".." in parts or not parts:
                raise RuntimeError(f"{zip_path}: {info.filename!r} is not a file of {module}@{version}")
            if info.is_dir():
                continue
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(info))


def replaced_go_mod(go_mod: str, module: str, directory: Path) -> str:
    """The wrapper's go.mod with MODULE replaced by DIRECTORY: what the build of a generated copy reads."""
    note = "// Added by make tools: the copy with upstream's generated files."
    return f"{go_mod.rstrip()}\n\n{note}\nreplace {module} => {directory}\n"


def prepare_generated(
    program: Program, go: str, wrapper_dir: Path, cache: Path, env: dict[str, str], pin: str, values: dict[str, str]
) -> Path:
    """Unpack the pinned module, run upstream's generator in it, and return the go.mod to build it with."""
    spec = program.generate
    work = cache / program.wrapper
    module_dir = (work / "module").resolve()
    extract_module(module_zip(go, wrapper_dir, program.source, pin, env), program.source, pin, module_dir)
    build_dir = work / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    modfile = (build_dir / "go.mod").resolve()
    modfile.write_text(replaced_go_mod((wrapper_dir / "go.mod").read_text(), program.source, module_dir))
    shutil.copyfile(wrapper_dir / "go.sum", build_dir / "go.sum")
    generator = (work / "generate").resolve()
    built = run_go(
        go,
        ["build", "-trimpath", "-modfile", str(modfile), "-o", str(generator), str(module_dir / spec["generator"])],
        wrapper_dir,
        dict(env, CGO_ENABLED="0"),
        timeout=3600,
    )
    if built.returncode != 0:
        tail = "\n".join(built.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"go build {spec['generator']} of {program.source} failed:\n{tail}")
    where = module_dir / spec["dir"]
    generator_env = dict(env, **{key: value.format(**values) for key, value in spec.get("env", {}).items()})
    ran = run_text([str(generator)], 600, env=generator_env, cwd=where)
    missing = [name for name in spec["outputs"] if not (where / name).is_file() or not (where / name).stat().st_size]
    if ran.returncode != 0 or missing:
        raise RuntimeError(
            f"upstream's generator {spec['generator']} did not write {', '.join(missing) or 'its files'} "
            f"(exit {ran.returncode}): {(ran.stderr or ran.stdout).strip()[:300]}"
        )
    return modfile


def parse_buildinfo(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """`go version -m` output: {module: version} for the main module and every dependency, and the build
    settings ({"-ldflags": "...", "CGO_ENABLED": "0", ...}, quotes removed)."""
    modules: dict[str, str] = {}
    settings: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split("\t")
        if parts[0] in ("mod", "dep") and len(parts) >= 3:
            modules[parts[1]] = parts[2]
        elif parts[0] == "build" and len(parts) >= 2:
            key, _, value = parts[1].partition("=")
            settings[key] = json.loads(value) if value.startswith('"') else value
    return modules, settings


def check_buildinfo(program: Program, binary: Path, go: str, env: dict[str, str], pin: str, values: dict) -> None:
    """For a program without a version flag: its build info names the pinned module, its bytes hold `contains`."""
    shown = run_go(go, ["version", "-m", str(binary)], binary.parent, env, timeout=60)
    modules, _ = parse_buildinfo(shown.stdout)
    if shown.returncode != 0 or modules.get(program.source) != pin:
        found = modules.get(program.source, "no version") if shown.returncode == 0 else shown.stderr.strip()[:200]
        raise RuntimeError(f"{program.name}: `go version -m` shows {program.source} {found}, not the pin {pin}")
    content = binary.read_bytes()
    for text in (pattern.format(**values) for pattern in program.contains):
        if text.encode() not in content:
            what = "the generated files it embeds are not" if program.generate else "it is not"
            raise RuntimeError(f"{program.name} does not contain {text!r}: {what} what tools/programs.toml pins")


def build(
    program: Program,
    go: str,
    wrapper_dir: Path,
    bin_dir: Path,
    env: dict[str, str],
    date: str,
    version: str,
    cache: Path = CACHE,
) -> None:
    values = placeholders(program.release or version, date)
    ldflags = " ".join(flag.format(**values) for flag in program.ldflags)
    partial = bin_dir / f".{program.name}.partial"
    args = ["build", "-trimpath", "-o", str(partial)]
    if program.generate:
        args += ["-modfile", str(prepare_generated(program, go, wrapper_dir, cache, env, version, values))]
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
    if program.check == "buildinfo":
        try:
            check_buildinfo(program, partial, go, env, version, values)
        except RuntimeError:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(bin_dir / program.name)
        return
    try:
        check_version(program, partial, values, "its version variables (ldflags in tools/programs.toml)")
    except RuntimeError:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(bin_dir / program.name)


def check_version(program: Program, binary: Path, values: dict[str, str], what: str) -> None:
    """`binary VERSION_ARGS` prints the pinned version (`expect`), else RuntimeError saying `what` is wrong."""
    if program.check != "run":
        raise RuntimeError(f"{program.name} has no version flag to check an installed file with")
    expected = program.expect.format(**values)
    shown = run_text([str(binary), *program.version_args], 60)
    answer = (shown.stdout + shown.stderr).strip()
    if expected not in answer:
        raise RuntimeError(
            f"{program.name} {' '.join(program.version_args)} printed {answer[:200]!r}, not {expected!r}: "
            f"{what} no longer match upstream's"
        )


def from_releases(selected: list[Program | ModuleFile], bin_dir: Path, tools: Path) -> set[str]:
    """The programs installed from upstream's release files instead of built (tools/releases.py)."""
    programs = {p.name: p for p in selected if isinstance(p, Program)}
    pins = {
        name: p.release or required_version((tools / p.wrapper / "go.mod").read_text(), p.source)
        for name, p in programs.items()
    }

    def verify(name: str, binary: Path) -> None:
        check_version(programs[name], binary, placeholders(pins[name], ""), "the release file's version does")

    try:
        found, mode = releases.load(tools / "releases.toml"), releases.tools_from(os.environ.get("GPULAB_TOOLS_FROM"))
        connect_timeout(), download_timeout()  # settings checked before anything is asked
    except ValueError as problem:
        raise ToolsError(str(problem)) from None
    return releases.take(pins, bin_dir, found, mode, verify, say)


def copy_module_file(item: ModuleFile, zip_path: Path, version: str, bin_dir: Path) -> None:
    """Copy ITEM out of the (hash-checked) zip of the module version the wrapper pins."""
    with zipfile.ZipFile(zip_path) as archive:
        if (member := f"{item.module}@{version}/{item.path}") not in archive.namelist():
            raise RuntimeError(f"{item.module}@{version} has no file {item.path}")
        content = archive.read(member)
    partial = bin_dir / f".{item.name}.partial"
    partial.write_bytes(content)
    partial.chmod(item.mode)
    partial.replace(bin_dir / item.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make tools", description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=ROOT / "bin", help="where the programs go (default ./bin)")
    parser.add_argument("--go", default=os.environ.get("GO", "go"), help="the go command (default: go on PATH)")
    parser.add_argument("--tools", type=Path, default=TOOLS, help="the wrapper modules and programs.toml")
    parser.add_argument("--cache", type=Path, default=CACHE, help="unpacked modules with generated files")
    parser.add_argument("--group", default="tools", help="the group built when no program is named (lab-images)")
    parser.add_argument("only", nargs="*", help="build only these programs (default: all of --group)")
    args = parser.parse_args(argv)
    programs, unavailable = load_manifest(args.tools / "programs.toml")
    known = {p.name for p in programs}
    unknown = [name for name in args.only if name not in known]
    if unknown:
        say(f"unknown program {', '.join(unknown)}; the programs are: {', '.join(sorted(known))}")
        return 2
    selected = [p for p in programs if p.name in args.only or (not args.only and p.group == args.group)]
    if not selected:
        say(f"no program in group {args.group!r}; the groups are: {', '.join(sorted({p.group for p in programs}))}")
        return 2

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
            taken = from_releases(selected, args.bin, args.tools)
            remaining = [p for p in selected if p.name not in taken]
            built = build_all(remaining, args.go, args.bin, args.tools, args.cache) if remaining else 0
        except ToolsError as problem:
            say(str(problem))
            return 2
        except RuntimeError as failure:
            say(str(failure))
            return 1
    for name, reason in sorted(unavailable.items()):
        if not args.only and args.group == "tools":
            say(f"not built here: {name}: {reason} (see tools/README.md)")
    elapsed, up_to_date = time.monotonic() - started, len(selected) - built - len(taken)
    downloaded = f"{len(taken)} from upstream's release files, " if taken else ""
    summary = f"{len(selected)} programs in {args.bin}: {built} built, {downloaded}{up_to_date} up to date, "
    summary += f"in {elapsed:.0f} s"
    size = sum(f.stat().st_size for f in args.bin.rglob("*") if f.is_file() and not f.is_symlink())
    summary += f"; {size / 1e6:,.0f} MB on disk"
    if built:  # where, not how big: measuring a module cache of gigabytes takes longer than a warm build
        env = dict(os.environ)
        caches = [f"{name} {run_go(args.go, ['env', name], ROOT, env, 60).stdout.strip()}" for name in GO_CACHES]
        summary += f"; Go caches: {', '.join(caches)} (remove with `go clean -modcache -cache`)"
    say(summary)
    return 0


def build_all(programs: list[Program | ModuleFile], go: str, bin_dir: Path, tools: Path, cache: Path = CACHE) -> int:
    go_text, go_tuple = go_version(go)
    needed = max(go_line((tools / w / "go.mod").read_text()) for w in {p.wrapper for p in programs})
    if go_tuple < needed:
        raise ToolsError(
            f"{go_text} is older than go{'.'.join(map(str, needed))}, which the wrappers in tools/ need: "
            "install a newer Go, or let it fetch one (GOTOOLCHAIN=auto)"
        )
    # go.sum must already hold every checksum (-mod=readonly); our own repository's commit is not stamped
    # into the programs (-buildvcs=false), so a gpulab commit never changes what was built.
    env = dict(os.environ, GOFLAGS=f"{os.environ.get('GOFLAGS', '')} -mod=readonly -buildvcs=false".strip())
    dates: dict[str, tuple[str, str]] = {}
    built = 0
    for program in programs:
        wrapper_dir = tools / program.wrapper
        key = build_key(program, go_text, wrapper_dir)
        key_file = bin_dir / ".tools" / f"{program.name}.key"
        module = program.module if isinstance(program, ModuleFile) else program.source
        version = required_version((wrapper_dir / "go.mod").read_text(), module)
        if (bin_dir / program.name).exists() and key_file.exists() and key_file.read_text() == key:
            say(f"{program.name} {version}: up to date")
            continue
        start = time.monotonic()
        if isinstance(program, ModuleFile):
            zip_path = module_zip(go, wrapper_dir, module, version, env)
            say(f"{program.name} {version}: copying {program.path} of {module} (pinned by tools/{program.wrapper})")
            copy_module_file(program, zip_path, version, bin_dir)
            key_file.write_text(key)
            built += 1
            say(f"{program.name} {version}: copied, its zip's hash checked against tools/{program.wrapper}/go.sum")
            continue
        if program.wrapper not in dates:
            dates[program.wrapper] = (version, module_time(go, wrapper_dir, program.source, env))
        release = f" (release {program.release})" if program.release else ""
        say(f"{program.name} {version}{release}: building from tools/{program.wrapper}")
        build(program, go, wrapper_dir, bin_dir, env, dates[program.wrapper][1], version, cache)
        key_file.write_text(key)
        built += 1
        say(f"{program.name} {version}: built in {time.monotonic() - start:.0f} s")
    return built


if __name__ == "__main__":
    sys.exit(main())
