"""`make tools`' download path (tools/releases.py, tools/releases.toml): upstream's release files where they can be
downloaded, checked against pinned checksums; Go modules for the rest.

Boundaries: upstream's download sites (dl.k8s.io, github.com), played by a local HTTPS server with a certificate
of its own (tests/support/https_site.py; Python's default TLS context trusts it through SSL_CERT_FILE) behind
GPULAB_SOURCE_MIRROR, serving files whose checksums the test's releases.toml pins; a host that accepts a connection
and never answers (a hung server); the go command for the build path (tests/fakes/go, as in test_build_tools.py).
The served "programs" are scripts printing their version as the real ones do. The real release files were not
downloaded here (no internet): the time of this path on a machine with internet is docs/tools.md's open figure.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from https_site import SilentHost, Site, make_certificate

from tests.tools.test_build_tools import MANIFEST, builds, fake_tools, go_calls, pinned, run_tools
from tools import releases
from tools.manifest import load_manifest

KWOK_URLS = {
    "kwok": "https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok-linux-amd64",
    "kwokctl": "https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwokctl-linux-amd64",
}
KUBECTL_URL = "https://dl.k8s.io/release/v1.36.4/bin/linux/amd64/kubectl"


def script(version_line: str) -> bytes:
    return f"#!/bin/sh\necho '{version_line}'\n".encode()


# What each program prints for its version arguments (tools/programs.toml `expect`), as upstream's binaries do.
SERVED = {"kwok": script("v0.8.0"), "kwokctl": script("v0.8.0"), "kubectl": script("Client Version: v1.36.4")}
URLS = {**KWOK_URLS, "kubectl": KUBECTL_URL}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def releases_toml(entries: dict[str, bytes], version: str = "") -> str:
    """A releases.toml pinning `entries` (name -> the bytes whose sha256 it pins) at their real URLs."""
    text = ""
    for name, body in entries.items():
        pin = version or ("v1.36.4" if name == "kubectl" else "v0.8.0")
        text += f'[{name}]\nversion = "{pin}"\nurl = "{URLS[name]}"\nsha256 = "{sha(body)}"\ntrace = "test"\n\n'
    return text


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def site(certificate: tuple[Path, Path]) -> Iterator[Site]:
    served = Site(certificate)
    for name, body in SERVED.items():
        served.serve(URLS[name], body)
    yield served
    served.server.shutdown()


def tools_with(tmp_path: Path, pinned_files: dict[str, bytes]) -> Path:
    tools = fake_tools(tmp_path)
    (tools / "releases.toml").write_text(releases_toml(pinned_files))
    return tools


def download(tmp_path: Path, site_url: str, cert: Path, *programs: str, tools: Path, **env: str):
    return run_tools(
        tmp_path,
        *programs,
        tools=tools,
        GPULAB_TOOLS_FROM=env.pop("GPULAB_TOOLS_FROM", "auto"),
        GPULAB_SOURCE_MIRROR=site_url,
        SSL_CERT_FILE=str(cert),
        **env,
    )


@pytest.mark.integration
def test_programs_with_a_release_file_are_downloaded_checked_and_never_built(
    tmp_path: Path, site: Site, certificate: tuple[Path, Path]
) -> None:
    tools = tools_with(tmp_path, SERVED)
    result = download(tmp_path, site.url, certificate[0], "kwok", "kwokctl", "kubectl", tools=tools)
    assert result.returncode == 0, result.stderr
    for name, body in SERVED.items():
        assert (tmp_path / "bin" / name).read_bytes() == body
        assert f"[tools] {name} " in result.stderr and "sha256 as tools/releases.toml pins" in result.stderr
    # Nothing was built and Go was never asked: a host without Go gets these programs too.
    assert go_calls(tmp_path) == []
    assert "3 built" not in result.stderr and "0 built, 3 from upstream's release files" in result.stderr
    assert not list((tmp_path / "bin").glob(".*.download"))

    asked = len(site.asked)
    again = download(tmp_path, site.url, certificate[0], "kwok", "kwokctl", "kubectl", tools=tools)
    assert again.returncode == 0, again.stderr
    assert len(site.asked) == asked, "a second run downloads nothing"
    assert "kwok v0.8.0: up to date (upstream's release file)" in again.stderr


@pytest.mark.integration
def test_the_rest_is_built_from_go_modules_beside_the_downloads(
    tmp_path: Path, site: Site, certificate: tuple[Path, Path]
) -> None:
    tools = tools_with(tmp_path, SERVED)
    result = download(tmp_path, site.url, certificate[0], "kwok", "kube-scheduler", tools=tools)
    assert result.returncode == 0, result.stderr
    assert set(builds(tmp_path)) == {"kube-scheduler"}
    assert (tmp_path / "bin" / "kwok").read_bytes() == SERVED["kwok"]


@pytest.mark.integration
def test_a_file_whose_checksum_is_not_the_pin_is_refused_named_and_not_installed(
    tmp_path: Path, site: Site, certificate: tuple[Path, Path]
) -> None:
    tools = tools_with(tmp_path, {**SERVED, "kwokctl": b"what the pin was taken from"})
    result = download(tmp_path, site.url, certificate[0], "kwok", "kwokctl", tools=tools)
    assert result.returncode == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"[tools] kwokctl: {site.url}/github.com/kubernetes-sigs/kwok/releases/download/")
    assert f"has sha256 {sha(SERVED['kwokctl'])}" in line
    assert f"tools/releases.toml pins {sha(b'what the pin was taken from')}" in line
    assert "GPULAB_TOOLS_FROM=build" in line
    assert not (tmp_path / "bin" / "kwokctl").exists()
    assert not list((tmp_path / "bin").glob(".*.download"))
    assert builds(tmp_path) == {}, "a wrong checksum is never built around"


@pytest.mark.integration
def test_a_file_reporting_another_version_is_refused(
    tmp_path: Path, site: Site, certificate: tuple[Path, Path]
) -> None:
    site.serve(KWOK_URLS["kwok"], script("v0.7.0"))
    tools = tools_with(tmp_path, {"kwok": script("v0.7.0")})
    result = download(tmp_path, site.url, certificate[0], "kwok", tools=tools)
    assert result.returncode == 1
    assert "kwok --version printed 'v0.7.0', not 'v0.8.0'" in result.stderr
    assert not (tmp_path / "bin" / "kwok").exists()


@pytest.fixture
def silent() -> Iterator[SilentHost]:
    host = SilentHost()
    yield host
    host.close()


@pytest.mark.integration
def test_a_host_that_never_answers_is_given_up_once_and_its_programs_are_built(
    tmp_path: Path, certificate: tuple[Path, Path], silent: SilentHost
) -> None:
    tools = tools_with(tmp_path, SERVED)
    result = download(tmp_path, silent.url, certificate[0], "kwok", "kwokctl", tools=tools, GPULAB_CONNECT_TIMEOUT="1")
    assert result.returncode == 0, result.stderr
    given_up = [line for line in result.stderr.splitlines() if "cannot be reached" in line]
    assert len(given_up) == 1, "both files are on one host: it is given up once"
    assert "building what it serves from Go modules instead" in given_up[0]
    assert set(builds(tmp_path)) == {"kwok", "kwokctl"}


@pytest.mark.integration
def test_download_only_fails_naming_the_host_that_did_not_answer(
    tmp_path: Path, certificate: tuple[Path, Path], silent: SilentHost
) -> None:
    tools = tools_with(tmp_path, SERVED)
    env = {"GPULAB_CONNECT_TIMEOUT": "1", "GPULAB_TOOLS_FROM": "download"}
    result = download(tmp_path, silent.url, certificate[0], "kwok", tools=tools, **env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"[tools] GPULAB_TOOLS_FROM=download: {silent.url}/github.com/")
    assert builds(tmp_path) == {}


@pytest.mark.integration
def test_a_missing_file_is_built_instead_and_build_mode_never_asks(
    tmp_path: Path, site: Site, certificate: tuple[Path, Path]
) -> None:
    site.files.clear()  # every path is a 404 now
    tools = tools_with(tmp_path, SERVED)
    result = download(tmp_path, site.url, certificate[0], "kwok", tools=tools)
    assert result.returncode == 0, result.stderr
    assert "the server answered 404" in result.stderr and "building kwok from Go modules instead" in result.stderr
    asked = len(site.asked)
    (tmp_path / "b").mkdir()
    built = download(tmp_path / "b", site.url, certificate[0], "kwokctl", tools=tools, GPULAB_TOOLS_FROM="build")
    assert built.returncode == 0, built.stderr
    assert len(site.asked) == asked


@pytest.mark.integration
def test_a_bad_setting_or_entry_is_one_line_and_exit_2(tmp_path: Path, site: Site, certificate: tuple[Path, Path]):
    tools = tools_with(tmp_path, SERVED)
    wrong = download(tmp_path, site.url, certificate[0], "kwok", tools=tools, GPULAB_TOOLS_FROM="internet")
    assert (wrong.returncode, wrong.stderr.count("\n")) == (2, 1)
    assert "GPULAB_TOOLS_FROM='internet': use one of auto, build, download" in wrong.stderr
    (tools / "releases.toml").write_text(releases_toml(SERVED).replace(sha(SERVED["kwok"]), "ABC"))
    bad = download(tmp_path, site.url, certificate[0], "kwok", tools=tools)
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1)
    assert "[kwok] sha256 'ABC' is not 64 lowercase hex digits" in bad.stderr


@pytest.mark.integration
def test_an_entry_behind_its_wrappers_pin_is_built(tmp_path: Path, site: Site, certificate: tuple[Path, Path]) -> None:
    tools = fake_tools(tmp_path)
    (tools / "releases.toml").write_text(releases_toml({"kwok": SERVED["kwok"]}).replace("v0.8.0", "v0.7.0"))
    result = download(tmp_path, site.url, certificate[0], "kwok", tools=tools)
    assert result.returncode == 0, result.stderr
    assert "tools/releases.toml has kwok v0.7.0, but its wrapper pins v0.8.0: building it" in result.stderr
    assert set(builds(tmp_path)) == {"kwok"} and site.asked == []


def test_another_platform_builds_everything() -> None:
    said: list[str] = []
    entry = releases.Release("kwok", "v0.8.0", KWOK_URLS["kwok"], "0" * 64, "test")
    taken = releases.take(
        {"kwok": "v0.8.0"}, Path("/nonexistent"), {"kwok": entry}, "auto", lambda *_: None, said.append,
        machine=("Linux", "aarch64"),
    )  # fmt: skip
    assert taken == set()
    assert said == ["the release files in tools/releases.toml are for Linux x86_64, this is Linux aarch64: every "
                    "program from Go modules"]  # fmt: skip


def test_every_pinned_release_file_is_a_program_at_its_wrappers_pin_with_a_trace() -> None:
    entries = releases.load()
    programs = {p.name: p for p in load_manifest()[0]}
    raw = tomllib.loads(releases.RELEASES.read_text())
    assert set(entries) == {"kubectl", "kubelet", "kubeadm", "kwok", "kwokctl"}
    for name, entry in entries.items():
        program = programs[name]
        assert program.check == "run", f"{name}: a release file is checked by the version it prints"
        assert entry.version == pinned(program.wrapper), name
        assert (entry.url.startswith("https://") and "/linux/amd64/" in entry.url) or entry.url.endswith("-linux-amd64")
        assert len(raw[name]["trace"]) > 20
    # kubectl's pin is the one the Docker lab installs too (model/versions.py).
    from model.versions import Versions

    assert entries["kubectl"].sha256 == Versions().kubectl.sha256_linux_amd64
    assert MANIFEST["kubernetes"]["programs"]["kubectl"]["expect"] == "Client Version: {version}"
