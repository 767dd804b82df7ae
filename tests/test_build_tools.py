"""`make tools` (scripts/build_tools.py): the recipe that builds the real programs, checked offline.

Boundary: the go command. tests/fakes/go answers as go 1.26 does and links "programs" that print their
version the way the real ones do: from the -X version variables they were given, else upstream's unset
default (Kubernetes says v0.0.0-master). So a recipe that loses its ldflags, its wrapper or its pins fails
here, not only in CI where the real go builds the real programs (tests/real checks those).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
FAKE_GO = ROOT / "tests" / "fakes" / "go"
SCRIPT = ROOT / "scripts" / "build_tools.py"
MANIFEST = tomllib.loads((TOOLS / "programs.toml").read_text())
WRAPPERS = [name for name in MANIFEST if name != "unavailable"]
PROGRAMS = {name: wrapper for wrapper in WRAPPERS for name in MANIFEST[wrapper]["programs"]}


def run_tools(tmp_path: Path, *args: str, tools: Path = TOOLS, go: bool = True, **env: str):
    path_dir = tmp_path / "path"
    path_dir.mkdir(exist_ok=True)
    if go and not (path_dir / "go").exists():
        (path_dir / "go").symlink_to(FAKE_GO)
    environ = {
        "PATH": f"{path_dir}:/usr/bin:/bin",
        "FAKE_DIR": str(tmp_path),
        "HOME": str(tmp_path),
        "GOFLAGS": "-buildvcs=false",
        **env,
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--bin", str(tmp_path / "bin"), "--tools", str(tools), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def go_calls(tmp_path: Path) -> list[dict[str, object]]:
    calls = []
    log = tmp_path / "go-calls"
    for line in log.read_text().splitlines() if log.exists() else []:
        match = re.fullmatch(r"cwd=(.*) cgo=(.*) goflags=(.*) args=(.*)", line)
        assert match, line
        calls.append({"cwd": Path(match[1]), "cgo": match[2], "goflags": match[3], "args": match[4].split("\x1f")[:-1]})
    return calls


def builds(tmp_path: Path) -> dict[str, dict[str, object]]:
    """The `go build` calls, by the program they wrote."""
    found = {}
    for call in go_calls(tmp_path):
        args = call["args"]
        if args and args[0] == "build":
            found[Path(args[args.index("-o") + 1]).name.strip(".").removesuffix(".partial")] = call
    return found


def pinned(wrapper: str) -> str:
    go_mod = (TOOLS / wrapper / "go.mod").read_text()
    source = MANIFEST[wrapper]["source"]
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(source)}\s+(v\S+)", go_mod, re.MULTILINE)
    assert match, f"tools/{wrapper}/go.mod does not require {source}"
    return match[1]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory):
    tmp_path = tmp_path_factory.mktemp("tools")
    result = run_tools(tmp_path)
    return tmp_path, result


def test_every_program_is_built_from_its_wrapper_with_upstreams_flags(first_run) -> None:
    tmp_path, result = first_run
    assert result.returncode == 0, result.stderr
    built = builds(tmp_path)
    assert set(built) == set(PROGRAMS)
    for name, call in built.items():
        wrapper = PROGRAMS[name]
        table = MANIFEST[wrapper]
        args = call["args"]
        assert call["cwd"] == TOOLS / wrapper, name
        assert args[-1] == table["programs"][name]["package"], name
        assert "-trimpath" in args, name
        assert call["cgo"] == ("1" if table["cgo"] else "0"), name
        # go.sum must hold every checksum: a missing one fails the build instead of being fetched unverified.
        assert "-mod=readonly" in str(call["goflags"]).split(), name
        if table["tags"]:
            assert args[args.index("-tags") + 1] == ",".join(table["tags"]), name


def test_each_program_reports_its_pinned_version(first_run) -> None:
    tmp_path, result = first_run
    assert result.returncode == 0, result.stderr
    kubernetes = pinned("kubernetes")
    major, minor = re.match(r"v(\d+)\.(\d+)", kubernetes).groups()
    ldflags = builds(tmp_path)["kube-apiserver"]["args"]
    ldflags = ldflags[ldflags.index("-ldflags") + 1]
    # kwokctl picks the API server's flags from `kube-apiserver --version`: the release's own variables.
    for variable, value in {"gitVersion": kubernetes, "gitMajor": major, "gitMinor": minor}.items():
        assert f"-X k8s.io/component-base/version.{variable}={value}" in ldflags
        assert f"-X k8s.io/client-go/pkg/version.{variable}={value}" in ldflags
    for name, wrapper in PROGRAMS.items():
        entry = MANIFEST[wrapper]["programs"][name]
        shown = subprocess.run([tmp_path / "bin" / name, *entry["version_args"]], capture_output=True, text=True)
        assert pinned(wrapper).lstrip("v") in shown.stdout, (name, shown.stdout)


def test_progress_is_one_line_per_program_start_and_end_then_a_summary(first_run) -> None:
    _, result = first_run
    lines = result.stderr.splitlines()
    for name, wrapper in PROGRAMS.items():
        assert f"[tools] {name} {pinned(wrapper)}: building from tools/{wrapper}" in lines
        assert any(re.fullmatch(rf"\[tools\] {name} \S+: built in \d+ s", line) for line in lines), name
    summary = lines[-1]
    assert re.search(rf"{len(PROGRAMS)} programs in .*: {len(PROGRAMS)} built, 0 up to date, in \d+ s", summary)
    assert "MB on disk" in summary and "GOMODCACHE" in summary and "go clean -modcache -cache" in summary
    # What this proxy cannot serve is said, one line each, not left for the user to discover.
    for name in MANIFEST["unavailable"]:
        assert sum(f"not built here: {name}:" in line for line in lines) == 1


def test_a_second_run_builds_nothing(tmp_path: Path) -> None:
    assert run_tools(tmp_path).returncode == 0
    (tmp_path / "go-calls").unlink()
    again = run_tools(tmp_path)
    assert again.returncode == 0, again.stderr
    assert builds(tmp_path) == {}
    assert all(call["args"][:2] == ["env", "GOVERSION"] for call in go_calls(tmp_path))
    assert f"0 built, {len(PROGRAMS)} up to date" in again.stderr


def test_changing_one_pin_rebuilds_only_that_wrappers_programs(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    shutil.copytree(TOOLS, tools)
    assert run_tools(tmp_path, tools=tools).returncode == 0
    (tmp_path / "go-calls").unlink()
    go_mod = tools / "kwok" / "go.mod"
    go_mod.write_text(go_mod.read_text().replace("sigs.k8s.io/kwok v0.8.0", "sigs.k8s.io/kwok v0.8.1"))
    again = run_tools(tmp_path, tools=tools)
    assert again.returncode == 0, again.stderr
    kwok_programs = {name for name, wrapper in PROGRAMS.items() if wrapper == "kwok"}
    assert set(builds(tmp_path)) == kwok_programs
    assert "kwokctl v0.8.1: building from tools/kwok" in again.stderr


def test_without_go_one_line_says_what_is_missing(tmp_path: Path) -> None:
    result = run_tools(tmp_path, go=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "`go` not found" in result.stderr and "Go 1.26" in result.stderr and "make test does not" in result.stderr


def test_an_old_go_is_named_with_the_version_needed(tmp_path: Path) -> None:
    result = run_tools(tmp_path, FAKE_GO_VERSION="go1.24.4")
    assert result.returncode == 2
    needed = max(
        tuple(int(n) for n in re.search(r"^go (\S+)", (TOOLS / w / "go.mod").read_text(), re.M)[1].split("."))
        for w in WRAPPERS
    )
    assert f"go1.24.4 is older than go{'.'.join(map(str, needed))}" in result.stderr
    assert builds(tmp_path) == {}


def test_without_the_module_proxy_one_line_says_so_before_any_build(tmp_path: Path) -> None:
    result = run_tools(tmp_path, FAKE_GO_PROXY_DOWN="1")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "could not download the modules of tools/" in result.stderr
    assert "no such host" in result.stderr and "needs the Go module proxy" in result.stderr
    assert builds(tmp_path) == {}


def test_a_failed_build_names_the_package_and_leaves_no_partial_program(tmp_path: Path) -> None:
    package = MANIFEST["kwok"]["programs"]["kwokctl"]["package"]
    result = run_tools(tmp_path, "kwok", "kwokctl", FAKE_GO_BUILD_FAIL=package)
    assert result.returncode == 1
    assert f"go build {package} failed in tools/kwok" in result.stderr and "undefined: app.NewCommand" in result.stderr
    assert (tmp_path / "bin" / "kwok").exists()
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [".tools", "kwok"]


def test_a_program_that_does_not_report_its_pin_is_refused(tmp_path: Path) -> None:
    """Without upstream's version variables the real kube-apiserver says v0.0.0-master, and kwokctl, which
    reads `kube-apiserver --version`, would choose the wrong flags: such a build must not land in bin/."""
    tools = tmp_path / "tools"
    shutil.copytree(TOOLS, tools)
    manifest = tools / "programs.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace('"-X", "k8s.io/component-base/version.gitVersion={version}",', ""))
    result = run_tools(tmp_path, "kube-apiserver", tools=tools)
    assert result.returncode == 1
    assert "printed 'Kubernetes v0.0.0-master+$Format:%H$', not 'Kubernetes v1.36.4'" in result.stderr
    assert not (tmp_path / "bin" / "kube-apiserver").exists()


def test_an_unknown_program_name_lists_the_programs(tmp_path: Path) -> None:
    result = run_tools(tmp_path, "kube-proxy")
    assert result.returncode == 2
    assert "unknown program kube-proxy" in result.stderr and "kube-apiserver" in result.stderr


def test_the_wrappers_pin_what_the_readme_promises() -> None:
    """The pins, read from the wrappers' go.mod files: the Kubernetes staging modules at the release's own
    v0.MINOR.PATCH, etcd's siblings at the server's release, Pulumi's sdk/v3 at the CLI's release."""
    kubernetes = pinned("kubernetes")
    staging = "v0" + kubernetes[2:]
    go_mod = (TOOLS / "kubernetes" / "go.mod").read_text()
    replaced = re.findall(r"^\s+(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", go_mod, re.MULTILINE)
    assert len(replaced) >= 30 and all(a == b and v == staging for a, b, v in replaced)
    etcd = pinned("etcd")
    etcd_mod = (TOOLS / "etcd" / "go.mod").read_text()
    assert set(re.findall(r"=> go\.etcd\.io/\S+ (v\S+)", etcd_mod)) == {etcd}
    pulumi_mod = (TOOLS / "pulumi" / "go.mod").read_text()
    assert re.search(rf"github.com/pulumi/pulumi/sdk/v3 {re.escape(pinned('pulumi'))}\b", pulumi_mod)
    for wrapper in WRAPPERS:
        go_sum = (TOOLS / wrapper / "go.sum").read_text()
        assert f"{MANIFEST[wrapper]['source']} {pinned(wrapper)} h1:" in go_sum, wrapper


def test_make_tools_runs_the_builder() -> None:
    dry = subprocess.run(["make", "-n", "tools"], cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
    assert dry.returncode == 0 and "scripts/build_tools.py" in dry.stdout
