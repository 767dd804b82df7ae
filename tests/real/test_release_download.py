"""`make tools`' download path with the real programs: the files a local HTTPS server serves (behind
GPULAB_SOURCE_MIRROR, at upstream's URLs) are the real kubectl, kubeadm, kwok, kwokctl (and kubelet where it was
built) of ./bin, so the version check tools/releases.py runs on an installed file meets what the real programs
print (`kubectl version --client`, `kubeadm version -o short`, `kwok --version`, ...), not what a stand-in says.
Upstream's own release files are not downloaded here (no internet); they are built with upstream's release
ldflags (tools/programs.toml), so they print the same. No go on PATH: nothing may be built.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from https_site import Site, make_certificate
from shared_data import ROOT

from tests.real import cluster as kwok
from tools import releases


def test_the_real_programs_pass_the_release_files_checks_and_nothing_is_built(tmp_path: Path) -> None:
    folder = kwok.bin_dir()
    wanted = ["kubectl", "kubeadm", "kwok", "kwokctl"] + (["kubelet"] if os.access(folder / "kubelet", os.X_OK) else [])
    tools = tmp_path / "tools"
    shutil.copytree(ROOT / "tools", tools, symlinks=True)
    entries = releases.load()
    site = Site(make_certificate(tmp_path))
    try:
        text = ""
        for name in wanted:
            body = (folder / name).read_bytes()
            site.serve(entries[name].url, body)
            digest = hashlib.sha256(body).hexdigest()
            text += (
                f'[{name}]\nversion = "{entries[name].version}"\nurl = "{entries[name].url}"\n'
                f'sha256 = "{digest}"\ntrace = "the real program of {folder}"\n\n'
            )
        (tools / "releases.toml").write_text(text)
        env = {
            "PATH": "/usr/bin:/bin",  # no go: a program not downloaded could not be built
            "HOME": str(tmp_path),
            "GPULAB_TOOLS_FROM": "download",
            "GPULAB_SOURCE_MIRROR": site.url,
            "SSL_CERT_FILE": str(tmp_path / "cert.pem"),
        }
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.build",
                "--bin",
                str(tmp_path / "bin"),
                "--tools",
                str(tools),
                *wanted,
            ],
            cwd=ROOT,  # as make runs it: a module, from the project folder
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        site.server.shutdown()
    assert result.returncode == 0, result.stderr
    assert f"0 built, {len(wanted)} from upstream's release files" in result.stderr
    for name in wanted:
        assert (tmp_path / "bin" / name).read_bytes() == (folder / name).read_bytes(), name
    assert sorted(path.split("/")[-1] for path in site.asked) == sorted(
        entries[name].url.rsplit("/", 1)[-1] for name in wanted
    )


@pytest.mark.parametrize("name", ["kubectl", "kwok"])
def test_a_real_program_of_another_release_is_refused_by_its_version(tmp_path: Path, name: str) -> None:
    """The pin names a release the served program is not (v1.36.4 against v1.36.3, v0.8.0 against v0.7.0): the
    real program's own answer refuses it, whatever its checksum."""
    folder = kwok.bin_dir()
    entry = releases.load()[name]
    other = {"kubectl": ("v1.36.4", "v1.36.3"), "kwok": ("v0.8.0", "v0.7.0")}[name]
    tools = tmp_path / "tools"
    shutil.copytree(ROOT / "tools", tools, symlinks=True)
    body = (folder / name).read_bytes()
    url = entry.url.replace(other[0], other[1])
    (tools / "releases.toml").write_text(
        f'[{name}]\nversion = "{other[1]}"\nurl = "{url}"\nsha256 = "{hashlib.sha256(body).hexdigest()}"\n'
        'trace = "test"\n'
    )
    for wrapper in ("kubernetes", "kwok"):  # the wrapper pins the other release too, so the entry is taken
        go_mod = tools / wrapper / "go.mod"
        go_mod.write_text(go_mod.read_text().replace(f" {other[0]} // indirect", f" {other[1]} // indirect"))
    site = Site(make_certificate(tmp_path))
    try:
        site.serve(url, body)
        result = subprocess.run(
            [sys.executable, "-m", "tools.build", "--bin", str(tmp_path / "bin"), "--tools", str(tools), name],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPULAB_TOOLS_FROM": "download",
                 "GPULAB_SOURCE_MIRROR": site.url, "SSL_CERT_FILE": str(tmp_path / "cert.pem")},
        )  # fmt: skip
    finally:
        site.server.shutdown()
    assert result.returncode == 1, result.stderr
    assert f"not '{'Client Version: ' if name == 'kubectl' else ''}{other[1]}'" in result.stderr
    assert not (tmp_path / "bin" / name).exists()
