"""Upstream's release files for programs `make tools` would otherwise build (tools/releases.toml).

GPULAB_TOOLS_FROM chooses the path: `auto` (the default) installs a program's release file when its host answers
and builds the rest from Go modules; `build` downloads nothing (gpulab's CI, which has no internet); `download`
stops make tools unless every program with a release file was downloaded. A host that does not answer within
GPULAB_CONNECT_TIMEOUT seconds (10; a transfer is also bounded by GPULAB_DOWNLOAD_TIMEOUT, 900: boundary/downloads.py)
is given up at once, for every file it serves, and make tools says which path each program took. A file is
installed only once its sha256 equals the pin and the program reports its pinned version; a wrong checksum stops
make tools (exit 1): it is never built around.
GPULAB_SOURCE_MIRROR serves upstream's sites from a mirror, as for `make cache`. Standard library only.
"""

from __future__ import annotations

import hashlib
import platform
import re
import tomllib
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boundary import downloads  # standard library only, as this file

RELEASES = Path(__file__).resolve().parent / "releases.toml"
MODES = ("auto", "build", "download")
# The platform of every file in releases.toml (upstream publishes others under other URLs and checksums).
PLATFORM = ("Linux", "x86_64")
SHA256 = re.compile(r"[0-9a-f]{64}")


class ReleaseError(RuntimeError):
    """A release file that must stop make tools: a wrong checksum or version, or a download that was demanded."""


@dataclass(frozen=True)
class Release:
    name: str
    version: str
    url: str
    sha256: str
    trace: str

    def key(self) -> str:
        """What bin/.tools/NAME.key holds for a program installed from this file (a build's key differs)."""
        return "release " + hashlib.sha256(f"{self.url}\n{self.sha256}".encode()).hexdigest()


def load(path: Path = RELEASES) -> dict[str, Release]:
    """The release files by program name; ValueError naming the entry and the key for a malformed one."""
    if not path.is_file():
        return {}
    releases = {}
    for name, entry in tomllib.loads(path.read_text()).items():
        missing = [key for key in ("version", "url", "sha256", "trace") if not entry.get(key)]
        if missing:
            raise ValueError(f"{path.name}: [{name}] has no {', '.join(missing)}")
        if not SHA256.fullmatch(entry["sha256"]):
            raise ValueError(f"{path.name}: [{name}] sha256 {entry['sha256']!r} is not 64 lowercase hex digits")
        if not entry["url"].startswith("https://") or entry["version"] not in entry["url"]:
            raise ValueError(f"{path.name}: [{name}] url must be https:// and name its version {entry['version']}")
        releases[name] = Release(name, entry["version"], entry["url"], entry["sha256"], entry["trace"])
    return releases


def tools_from(value: str | None) -> str:
    mode = value or "auto"
    if mode not in MODES:
        raise ValueError(f"GPULAB_TOOLS_FROM={mode!r}: use one of {', '.join(MODES)} (auto is the default)")
    return mode


def take(
    pins: dict[str, str],
    bin_dir: Path,
    releases: dict[str, Release],
    mode: str,
    verify: Callable[[str, Path], None],
    say: Callable[[str], None],
    machine: tuple[str, str] = (platform.system(), platform.machine()),
) -> set[str]:
    """Install the release files of the programs in `pins` (name -> the version its wrapper pins) that have one;
    returns the names now in bin_dir from their release (downloaded or already there). `verify` raises
    RuntimeError unless the program reports its pinned version."""
    offered = {name: release for name, release in releases.items() if name in pins}
    if not offered:
        return set()
    if mode == "build":  # chosen by name: nothing to say
        return set()
    for name, release in list(offered.items()):
        if release.version != pins[name]:
            stale = f"tools/releases.toml has {name} {release.version}, but its wrapper pins {pins[name]}"
            if mode == "download":
                raise ReleaseError(f"GPULAB_TOOLS_FROM=download: {stale}; move the entry to that release")
            say(f"{stale}: building it from Go modules")
            del offered[name]
    if machine != PLATFORM:
        problem = f"the release files in tools/releases.toml are for {' '.join(PLATFORM)}, this is {' '.join(machine)}"
        if mode == "download":
            raise ReleaseError(f"GPULAB_TOOLS_FROM=download: {problem}")
        say(f"{problem}: every program from Go modules")
        return set()
    taken: set[str] = set()
    silent: dict[str, str] = {}  # host -> why it was given up
    for name, release in offered.items():
        key_file = bin_dir / ".tools" / f"{name}.key"
        if (bin_dir / name).exists() and key_file.exists() and key_file.read_text() == release.key():
            say(f"{name} {release.version}: up to date (upstream's release file)")
            taken.add(name)
            continue
        host = urllib.parse.urlsplit(downloads.mirrored(release.url)).netloc
        if host in silent:
            continue
        try:
            _install(release, bin_dir, verify, say)
        except (downloads.Unreachable, downloads.Refused) as problem:
            if mode == "download":
                raise ReleaseError(f"GPULAB_TOOLS_FROM=download: {problem}") from None
            if isinstance(problem, downloads.Unreachable):
                silent[host] = str(problem)
                say(f"{problem}: building what it serves from Go modules instead")
            else:
                say(f"{problem}: building {name} from Go modules instead")
            continue
        key_file.write_text(release.key())
        taken.add(name)
    return taken


def _install(release: Release, bin_dir: Path, verify: Callable[[str, Path], None], say: Callable[[str], None]) -> None:
    partial = bin_dir / f".{release.name}.download"
    try:
        source = downloads.download(release.url, partial)
        digest = hashlib.sha256(partial.read_bytes()).hexdigest()
        if digest != release.sha256:
            raise ReleaseError(
                f"{release.name}: {source} has sha256 {digest}, but tools/releases.toml pins {release.sha256} "
                f"({release.trace}); nothing was installed. Check the source, or build from Go modules with "
                "GPULAB_TOOLS_FROM=build"
            )
        partial.chmod(0o755)
        verify(release.name, partial)
        partial.replace(bin_dir / release.name)
    finally:
        partial.unlink(missing_ok=True)
    say(f"{release.name} {release.version}: upstream's release file {source}, sha256 as tools/releases.toml pins")
