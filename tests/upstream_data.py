"""The upstream files tests validate against: where they are found, and `make upstream-data` to fetch them.

Tests check gpulab's generated objects against upstream CRD schemas, chart values, chart archives and
manifests, kept unchanged (each file's origin and checksum below; the same table as
../shared/upstream/SOURCES.md). A file is looked for, in order, in:

1. `$GPULAB_UPSTREAM` (a folder laid out like ../shared/upstream),
2. `../shared/upstream` next to the project (the team's read-only copy; CI always has it),
3. `.cache/upstream` in the project, which `make upstream-data` fills from the URLs below.

Every file found is checked against its sha256 before a test uses it. A missing file skips the test
with one line that says how to get it; with `CI=true` it fails instead, so CI always runs everything.

`python tests/upstream_data.py [--dest DIR]` downloads every file that has a URL, verifies each
checksum and refuses (deletes, exit 1) a file that does not match.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_UPSTREAM = ROOT.parent / "shared" / "upstream"
CACHE = ROOT / ".cache" / "upstream"
RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class UpstreamFile:
    path: str  # relative to the upstream folder
    sha256: str
    url: str | None  # None: no single public URL serves this exact file


def _raw(repo: str, ref: str, path: str) -> str:
    return f"{RAW}/{repo}/{ref}/{path}"


KAMAJI_REF = "26.8.2-edge"  # = commit ddbabd87ed0e
FILES: dict[str, UpstreamFile] = {
    entry.path: entry
    for entry in (
        UpstreamFile(
            "kamaji/tenantcontrolplanes.crd.yaml",
            "be598e72e4410c46795759f712dd60ebb2691f6bbdc22147ac3b4dc3a3370140",
            _raw("clastix/kamaji", KAMAJI_REF, "charts/kamaji/crds/kamaji.clastix.io_tenantcontrolplanes.yaml"),
        ),
        UpstreamFile(
            "kamaji/datastores.crd.yaml",
            "47cf32ce26f850662d0b804f7084f1cf40bf4d094c160d9425222f903dbf3d04",
            _raw("clastix/kamaji", KAMAJI_REF, "charts/kamaji/crds/kamaji.clastix.io_datastores.yaml"),
        ),
        UpstreamFile(
            "kamaji/chart-values.yaml",
            "6007c09f6fa9eac802fce17066438603d9d79eb514b48a176c10a7c9494247f6",
            _raw("clastix/kamaji", KAMAJI_REF, "charts/kamaji/values.yaml"),
        ),
        UpstreamFile(
            "hami/chart-values-2.8.3.yaml",
            "1db86c5b8a325898722008cd36d6037904ef4899a33521376b8de3c7d7a6f80f",
            _raw("Project-HAMi/HAMi", "v2.8.3", "charts/hami/values.yaml"),
        ),
        UpstreamFile(
            "hami/chart-values-2.10.0.yaml",
            "4056924d87564eecfedf04eef64a20dece2615319e0957dd94606c1bada19ef3",
            _raw("Project-HAMi/HAMi", "v2.10.0", "charts/hami/values.yaml"),
        ),
        UpstreamFile(
            "metallb/ipaddresspools.crd.yaml",
            "585d55016cb9cf1aac3ed4a63b1075051bf8c20aab28dfcd3cfbe58a632ed230",
            _raw("metallb/metallb", "v0.16.1", "config/crd/bases/metallb.io_ipaddresspools.yaml"),
        ),
        UpstreamFile(
            "metallb/l2advertisements.crd.yaml",
            "c2561949e442c8253237ef81dbfe7c4a69fd5c1bfdf30f8bc0829d74d4cd4d64",
            _raw("metallb/metallb", "v0.16.1", "config/crd/bases/metallb.io_l2advertisements.yaml"),
        ),
        UpstreamFile(
            "metallb/metallb-native-v0.16.1.yaml",
            "bf25feebb7582ca7df845efd52ffbc2960d6cbf4cfc972f47fded9f788b67f0b",
            _raw("metallb/metallb", "v0.16.1", "config/manifests/metallb-native.yaml"),
        ),
        UpstreamFile(
            "calico/calico-v3.31.6.yaml",
            "34012557637766d4367f0e7d2ea8b6507fca6df68e08b87fcdcd527f689e2637",
            _raw("projectcalico/calico", "v3.31.6", "manifests/calico.yaml"),
        ),
        UpstreamFile(
            "pulumi/project.schema.json",
            "55b50752803a9b595675fa3119e710f91e907821deef1674e9e25e7b5ebc5daf",
            _raw("pulumi/pulumi", "1b5949891b3c", "sdk/go/common/workspace/project.json"),
        ),
        UpstreamFile(
            "charts/hami-2.8.3.tgz",
            "57835bd9da24eec5916e528ded7fcfbc4c05fa60020efd16370c1c2f4050f4f6",
            "https://project-hami.github.io/HAMi/charts/hami-2.8.3.tgz",
        ),
        # charts/kamaji at 26.8.2-edge with the kamaji-etcd v0.17.0 subchart under charts/, packed as the
        # published chart bundles it. Kamaji republishes `0.0.0+latest` in place, so no URL serves this
        # exact archive: only ../shared/upstream or $GPULAB_UPSTREAM have it.
        UpstreamFile(
            "charts/kamaji-0.0.0+latest-26.8.2-edge.tgz",
            "abc6712ac6a4d5945c1c8042eadf932fa14e064f61654c3c0b2784f82306e75e",
            None,
        ),
    )
}


def search_path() -> list[Path]:
    folders = []
    if os.environ.get("GPULAB_UPSTREAM"):
        folders.append(Path(os.environ["GPULAB_UPSTREAM"]))
    return [*folders, SHARED_UPSTREAM, CACHE]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Missing(LookupError):
    """The file is in none of the search folders; str() is one line saying how to get it."""


class Corrupt(ValueError):
    """A file was found but its checksum is not the pinned one."""


@functools.cache
def find(relative: str) -> Path:
    """The verified path of an upstream file; raises Missing or Corrupt."""
    entry = FILES[relative]
    for folder in search_path():
        path = folder / relative
        if path.is_file():
            actual = sha256_of(path)
            if actual != entry.sha256:
                raise Corrupt(f"{path} has sha256 {actual}, not the pinned {entry.sha256}; replace it")
            return path
    how = (
        "run `make upstream-data`"
        if entry.url
        else "no public URL serves this exact archive; point GPULAB_UPSTREAM at a copy of ../shared/upstream"
    )
    raise Missing(f"upstream test data {relative} not found ({how}, or set GPULAB_UPSTREAM)")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def upstream_path(relative: str) -> Path:
    """For tests: the verified file, or a one-line skip (a failure in CI) when it is not there."""
    import pytest

    try:
        return find(relative)
    except Missing as missing:
        if in_ci():
            pytest.fail(f"{missing}; CI must run every test", pytrace=False)
        pytest.skip(str(missing))
    except Corrupt as corrupt:
        pytest.fail(str(corrupt), pytrace=False)


def download(entry: UpstreamFile, dest: Path, timeout: float = 60) -> str:
    """Fetch one file into dest (atomically), verify its checksum; returns a one-line report."""
    target = dest / entry.path
    if target.is_file() and sha256_of(target) == entry.sha256:
        return f"ok       {entry.path} (already here)"
    if entry.url is None:
        return f"skipped  {entry.path}: no public URL serves this exact file; set GPULAB_UPSTREAM to a copy"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".partial-", delete=False) as partial:
        partial_path = Path(partial.name)
        try:
            with urllib.request.urlopen(entry.url, timeout=timeout) as response:
                for block in iter(lambda: response.read(1 << 20), b""):
                    partial.write(block)
        except (OSError, ValueError) as error:
            partial_path.unlink(missing_ok=True)
            raise DownloadError(f"{entry.path}: download from {entry.url} failed: {error}") from None
    actual = sha256_of(partial_path)
    if actual != entry.sha256:
        partial_path.unlink()
        raise DownloadError(
            f"{entry.path}: {entry.url} served a file with sha256 {actual}, not the pinned {entry.sha256}; refused"
        )
    partial_path.replace(target)
    return f"fetched  {entry.path}"


class DownloadError(RuntimeError):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make upstream-data",
        description="Download the upstream files the tests validate against, checking each sha256.",
    )
    parser.add_argument("--dest", type=Path, default=CACHE, help=f"where to put them ({CACHE.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    failures = 0
    for entry in FILES.values():
        try:
            print(download(entry, args.dest))
        except DownloadError as error:
            failures += 1
            print(f"error    {error}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
