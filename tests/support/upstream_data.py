"""The upstream files tests validate against: where they are found, and `make upstream-data` to fetch them.

Tests check gpulab's generated objects against upstream CRD schemas, chart values, chart archives and
manifests, kept unchanged (each file's origin and checksum below; the same table as
../shared/upstream/SOURCES.md). A file is looked for, in order, in:

1. `$GPULAB_UPSTREAM` (a folder laid out like ../shared/upstream),
2. `../shared/upstream` next to the project (the team's read-only copy; CI always has it),
3. `.cache/upstream` in the project, which `make upstream-data` fills from the URLs below.

Every file found is checked against its sha256 (a rebuilt Kamaji archive not compressed by GNU gzip: its
tar's) before a test uses it. A missing file skips the test with one line that says how to get it; with
`CI=true` it fails instead, so CI always runs everything.

`make upstream-data` (`python tests/support/upstream_data.py [--dest DIR] [--deadline SECONDS]`) gets what is
missing: a file already in any of those folders (checksum verified) is used as it is, so a complete
copy means no download at all. Each missing file is downloaded from its pinned URL into `.cache/upstream`,
except the Kamaji chart archive, which no single URL serves: it is rebuilt from the chart sources at the
pinned Kamaji and kamaji-etcd commits (KAMAJI_CHART_SOURCES, build_kamaji_chart). Every download shares
one deadline, and the run ends with a one-line summary; a file that does not match its checksum is refused
(nothing kept, exit 1).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED_UPSTREAM = ROOT.parent / "shared" / "upstream"
CACHE = ROOT / ".cache" / "upstream"
RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class UpstreamFile:
    path: str  # relative to the upstream folder
    sha256: str
    url: str | None  # None: no single public URL serves this exact file (it is built, see BUILT)
    tar_sha256: str | None = None  # a .tgz: also accepted when its uncompressed tar has this digest


def _raw(repo: str, ref: str, path: str) -> str:
    return f"{RAW}/{repo}/{ref}/{path}"


KAMAJI_REF = "ddbabd87ed0e8d7c319414383e153c46f21733a9"  # tag 26.8.2-edge
KAMAJI_ETCD_REF = "92f31f016f4e91eae69797a538f88d768ddc7099"  # tag v0.17.0
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
        # exact archive: KamajiChart rebuilds it from the two repositories at their pinned commits.
        UpstreamFile(
            "charts/kamaji-0.0.0+latest-26.8.2-edge.tgz",
            "abc6712ac6a4d5945c1c8042eadf932fa14e064f61654c3c0b2784f82306e75e",
            None,
            tar_sha256="327d3edeb12c0c96fec33a26ddab98e368082e4cffc00d1c1b8ab841c778e421",
        ),
    )
}


# The Kamaji chart's sources: each file's git blob id at the pinned commit, as `git ls-tree -r <commit>
# <folder>` lists it (a public trace anyone can check). The team's archive holds exactly these 52 files.
KAMAJI_CHART_FILES = {
    "charts/kamaji": """
a03977f5e2ab8e34adb05f720eef356e55858ade .helmignore
1b0e1c97ebab48970b5509066e4880fc3a715785 Chart.lock
5a0226621c46615ac507907477b920ec030eeda5 Chart.yaml
a191fe4c93e93a527a6d461533661d4b7327ad51 Makefile
ee1628344691d23542666a896a0052188c6bbd2b README.md
bf43777f2f6d4aee69abc96db499e2255416ea30 README.md.gotmpl
2c2922abfaa7bd2d542a526ed9127fe88362eb73 controller-gen/clusterrole.yaml
be48bdb071ccad01c257a746a54508951cf37f52 controller-gen/crd-conversion.yaml
88a152e7a39a2d38f2b72fd2c6a35e3faf5db9ac controller-gen/mutating-webhook.yaml
b7eb1690d76663fa6fd90624697c4991711d634d controller-gen/validating-webhook.yaml
903f7c69b9d63a484b41c1c23e7966ca9a8c3d6b crds/kamaji.clastix.io_datastores.yaml
af838f1d996d72ee0246a03ea6801c2bdeda9924 crds/kamaji.clastix.io_kubeconfiggenerators.yaml
70dd8e022513fe069285de78ed3510787b6b33fc crds/kamaji.clastix.io_tenantcontrolplanes.yaml
670014e92f8a48eaa51e4f4227f2f4a633571856 templates/NOTES.txt
f0bf1bede3a8e8668aff2e96950b46dc83fb793a templates/_helpers.tpl
2f310b16f91ecb6873797383fbffdfda65fdb5c4 templates/certmanager_certificate.yaml
1bc3cbb6d2a25f04323e24a97fa8990c56813716 templates/certmanager_issuer.yaml
63178382e3815d3b204d0020c46bd7d50aa361a6 templates/controller.yaml
d7199d21d7ff401792477c440f443efbe2efb5cd templates/kubeconfiggenerator-deployment.yaml
7fa4237da7f53aa6962cd3d53044fb0c8f5b8d3a templates/mutatingwebhookconfiguration.yaml
43a1866f7bb20a16119b6604aa25fe073ea1fc32 templates/rbac.yaml
68ef848b3029a1dcab3b7c18722b63ef0ac592c8 templates/service_metrics.yaml
cdb26cd3baf7fd13f38a204844e70917686788ea templates/service_webhook.yaml
ce8d2194e0afc9b695205562cee033eebcf6bc5b templates/servicemonitor.yaml
eacf9d72e4fdf342388ed694e7e32bc9dce0c396 templates/validatingwebhookconfiguration.yaml
a37f140009f2e5ab700bcf902be3826a1cf89b01 values.sample.yaml
98d4dc94dc8da7e69fbffb189cca2dbac75839ee values.yaml
""",
    "charts/kamaji-etcd": """
0e8a0eb36f4ca2c939201c0d54b5d82a1ea34778 .helmignore
8b5aa192d60124dd76da5c8b252db0beade5606f Chart.yaml
73598cedcfee969f3e3e25bde28fca0b5cab8dba LICENSE
94f47498c3ba39d9ad957a1950e7f2cec1555a3a Makefile
94d5d498780b9154359034c234bae6bca8995883 README.md
04c36a534c6472f7f3efde2faa4d62bee9a326e9 README.md.gotmpl
2134373f293c06a939e5921f401b1224f2b75d0d templates/_helpers.tpl
30bc6f43aede8016814f127824cc079768011ea5 templates/etcd_alerts.yaml
caa542cfb95557ce5e8cfd2337dadcf527370945 templates/etcd_cert-manager_ca.yaml
6d4208e657d8ff51a307971473eabe78befb668b templates/etcd_cert-manager_clientcert.yaml
7163937436e826050dfaaa27748174c6efb0dd01 templates/etcd_cert-manager_peercert.yaml
9b9fdf9949dea6c2d70aac0b3421dc85cb796290 templates/etcd_cert-manager_servercert.yaml
1c27955f396ef35a7e542526e715f0b1d7301921 templates/etcd_client_service.yaml
79935b03cf29c834360f795a05cec390e0a39807 templates/etcd_cm.yaml
d956db5a2816ede81b5000d7d2290e31fb5a0cbb templates/etcd_datastore.yaml
c88ef7b47cdaa85d9a558364ac85138ba3315ae6 templates/etcd_headless_service.yaml
ae4172fb555fe5cc18f3dc8277cf864e476cb519 templates/etcd_job_postdelete.yaml
c506a2eec1e54245d2ababa3ccf9a0de75bfb06c templates/etcd_job_preinstall_1.yaml
b77cf6b1cf56d71a5bdb7b9ad1599f15bdfc5d08 templates/etcd_job_preinstall_2.yaml
81ec02e82faa8d23aafc4f414d4d7c02c7210d5c templates/etcd_metrics_rbac.yaml
bdd41be14bf29a093e3039bc9a65d832e01fb162 templates/etcd_rbac.yaml
99061ba73beb82eca5160689f82c5bfd7d51cdc2 templates/etcd_sa.yaml
d4eb50545d033e80152b3dbce128735dc09a16b1 templates/etcd_service_monitor.yaml
ddcaf5b28531914fc9acc0d3f6b6f8321b8e033d templates/etcd_sts.yaml
d63c82ebe006d94b66048a317c63b613cbe687c0 values.yaml
""",
}


@dataclass(frozen=True)
class ChartSource:
    """One chart folder of a repository at a commit, and where the archive holds it."""

    repo: str
    commit: str
    folder: str
    into: str

    def files(self) -> dict[str, str]:
        """Path in the folder -> git blob id."""
        lines = KAMAJI_CHART_FILES[self.folder].strip().splitlines()
        return {path: blob for blob, path in (line.split(" ", 1) for line in lines)}


KAMAJI_CHART_SOURCES = (
    ChartSource("clastix/kamaji", KAMAJI_REF, "charts/kamaji", "kamaji"),
    ChartSource("clastix/kamaji-etcd", KAMAJI_ETCD_REF, "charts/kamaji-etcd", "kamaji/charts/kamaji-etcd"),
)
# How the team's archive was packed (read from its tar headers): GNU tar format, entries in
# `tar --sort=name` order, all owned by root (uid/gid 0), mtime 2026-08-03T00:00Z (the Kamaji commit's
# day), files 0664 and directories 0775 as checked out, and 0755 for kamaji/charts/, the folder made
# for the subchart (git has no such folder); then `gzip -n -6`.
KAMAJI_CHART_MTIME = 1785715200
ADDED_FOLDERS = {"kamaji/charts/"}


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def tar_order(paths: list[str]) -> list[str]:
    """Directories (with a trailing /) and files as `tar --sort=name` walks them: each folder sorted by name,
    a folder before its contents."""
    tree: dict = {}
    for path in paths:
        node = tree
        for part in path.split("/"):
            node = node.setdefault(part, {})
    order: list[str] = []

    def walk(node: dict, prefix: str) -> None:
        for name in sorted(node):
            if node[name]:
                order.append(f"{prefix}{name}/")
                walk(node[name], f"{prefix}{name}/")
            else:
                order.append(f"{prefix}{name}")

    walk(tree, "")
    return order


def pack_chart(contents: dict[str, bytes]) -> bytes:
    """The uncompressed chart archive, packed as the team's archive was."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in tar_order(list(contents)):
            info = tarfile.TarInfo(name)
            info.mtime, info.uname, info.gname = KAMAJI_CHART_MTIME, "root", "root"
            if name.endswith("/"):
                info.type, info.mode = tarfile.DIRTYPE, 0o755 if name in ADDED_FOLDERS else 0o775
                tar.addfile(info)
            else:
                info.mode, info.size = 0o664, len(contents[name])
                tar.addfile(info, io.BytesIO(contents[name]))
    return buffer.getvalue()


def gzip_like_the_team(tar: bytes) -> tuple[bytes, str]:
    """GNU gzip's deflate (which packed the team's archive) is not zlib's: only it reproduces the bytes."""
    if gnu := shutil.which("gzip"):
        result = subprocess.run([gnu, "-n", "-6", "-c"], input=tar, capture_output=True, timeout=60)
        if result.returncode == 0:
            return result.stdout, "gzip -n -6"
    return gzip.compress(tar, compresslevel=6, mtime=0), "zlib"


def build_kamaji_chart(entry: UpstreamFile, dest: Path, deadline: float, raw: str = RAW) -> str:
    """Rebuild the Kamaji chart archive from its sources at the pinned commits; returns a one-line report."""
    wanted = [
        (f"{source.into}/{path}", f"{raw}/{source.repo}/{source.commit}/{source.folder}/{path}", blob)
        for source in KAMAJI_CHART_SOURCES
        for path, blob in source.files().items()
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        fetched = dict(zip(wanted, pool.map(lambda item: fetch(item[1], deadline), wanted), strict=True))
    contents = {}
    for (name, url, blob), content in fetched.items():
        if git_blob_id(content) != blob:
            raise DownloadError(f"{url} served a file with git blob id {git_blob_id(content)}, not {blob}")
        contents[name] = content
    tar = pack_chart(contents)
    if (tar_digest := hashlib.sha256(tar).hexdigest()) != entry.tar_sha256:
        raise DownloadError(f"the rebuilt tar has sha256 {tar_digest}, not the pinned {entry.tar_sha256}")
    archive, compressor = gzip_like_the_team(tar)
    write_atomically(dest / entry.path, archive)
    same = hashlib.sha256(archive).hexdigest() == entry.sha256
    how = "byte-identical to the pinned archive" if same else f"the pinned tar, compressed by {compressor}"
    sources = ", ".join(f"{source.repo}@{source.commit[:12]}" for source in KAMAJI_CHART_SOURCES)
    return f"built    {entry.path} ({len(contents)} files from {sources}; {how})"


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


def matches(path: Path, entry: UpstreamFile) -> str | None:
    """None when the file is the pinned one (or, for a rebuilt archive, holds the pinned tar); else its sha256."""
    actual = sha256_of(path)
    if actual == entry.sha256:
        return None
    if entry.tar_sha256:
        digest = hashlib.sha256()
        try:
            with gzip.open(path) as stream:
                for block in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(block)
        except (OSError, EOFError):
            return actual
        if digest.hexdigest() == entry.tar_sha256:
            return None
    return actual


class Missing(LookupError):
    """The file is in none of the search folders; str() is one line saying how to get it."""


class Corrupt(ValueError):
    """A file was found but its checksum is not the pinned one."""


@functools.cache
def find(relative: str) -> Path:
    """The verified path of an upstream file; raises Missing or Corrupt."""
    return locate(FILES[relative])


def locate(entry: UpstreamFile) -> Path:
    relative = entry.path
    for folder in search_path():
        path = folder / relative
        if path.is_file():
            if actual := matches(path, entry):
                raise Corrupt(f"{path} has sha256 {actual}, not the pinned {entry.sha256}; replace it")
            return path
    if pointed := os.environ.get("GPULAB_UPSTREAM"):
        raise Missing(
            f"upstream test data {relative} not found, not even in GPULAB_UPSTREAM={pointed} (run `make upstream-data`)"
        )
    raise Missing(f"upstream test data {relative} not found (run `make upstream-data`, or set GPULAB_UPSTREAM)")


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


class DownloadError(RuntimeError):
    pass


READ_TIMEOUT = 20.0  # seconds one read may block: a run ends at most this long after its deadline


def fetch(url: str, deadline: float) -> bytes:
    """The body at url, or DownloadError; gives up at the deadline (time.monotonic())."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DownloadError(f"download from {url} not started: the deadline has passed")
    blocks = []
    try:
        with urllib.request.urlopen(url, timeout=min(READ_TIMEOUT, remaining)) as response:
            for block in iter(lambda: response.read(1 << 20), b""):
                blocks.append(block)
                if time.monotonic() > deadline:
                    raise DownloadError(f"download from {url} still running at the deadline; gave up")
    except (OSError, ValueError) as error:
        raise DownloadError(f"download from {url} failed: {error}") from None
    return b"".join(blocks)


def write_atomically(target: Path, content: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".partial-", delete=False) as partial:
        partial.write(content)
    Path(partial.name).replace(target)


def download(entry: UpstreamFile, dest: Path, deadline: float | None = None) -> str:
    """Fetch one file into dest (atomically) and verify its checksum; returns a one-line report."""
    deadline = time.monotonic() + 300 if deadline is None else deadline
    target = dest / entry.path
    if target.is_file() and matches(target, entry) is None:
        return f"ok       {entry.path} (already here)"
    if entry.url is None:
        return build_kamaji_chart(entry, dest, deadline)
    content = fetch(entry.url, deadline)
    actual = hashlib.sha256(content).hexdigest()
    if actual != entry.sha256:
        raise DownloadError(f"{entry.url} served a file with sha256 {actual}, not the pinned {entry.sha256}; refused")
    write_atomically(target, content)
    return f"fetched  {entry.path}"


def main(argv: list[str] | None = None, files: list[UpstreamFile] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make upstream-data",
        description="Get the upstream files the tests validate against that no folder has yet, checking each one.",
    )
    parser.add_argument("--dest", type=Path, default=CACHE, help="where to put them (.cache/upstream)")
    parser.add_argument("--deadline", type=float, default=300, help="seconds for all downloads together (300)")
    args = parser.parse_args(argv)
    entries = list(FILES.values()) if files is None else files
    started = time.monotonic()
    found: dict[Path, int] = {}
    missing: list[UpstreamFile] = []
    errors: list[str] = []
    for entry in entries:
        try:
            path = locate(entry)
        except Missing:
            missing.append(entry)
        except Corrupt as corrupt:
            errors.append(str(corrupt))
        else:
            folder = Path(*path.parts[: len(path.parts) - len(Path(entry.path).parts)])
            found[folder] = found.get(folder, 0) + 1

    def get(entry: UpstreamFile) -> str | None:
        try:
            print(download(entry, args.dest, started + args.deadline), flush=True)
        except DownloadError as error:
            return f"{entry.path}: {error}"
        return None

    with ThreadPoolExecutor(max_workers=4) as pool:
        failed_downloads = [error for error in pool.map(get, missing) if error]
    errors += failed_downloads
    for error in errors:
        print(f"error    {error}", file=sys.stderr)
    fetched = len(missing) - len(failed_downloads)
    where = [f"{count} already in {folder}" for folder, count in found.items()]
    if fetched:
        where.append(f"{fetched} fetched into {args.dest}")
    print(
        f"upstream-data: {sum(found.values()) + fetched} of {len(entries)} files ready ({'; '.join(where) or 'none'}), "
        f"{len(errors)} failed, in {time.monotonic() - started:.1f} s"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
