"""Where upstream test data is found, how its absence reads (skip outside CI, failure in CI), and
`make upstream-data`: its downloader and the Kamaji chart rebuild, against servers on loopback laid out
as raw.githubusercontent.com is (`<owner>/<repo>/<commit>/<path>`)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import re
import shutil
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import upstream_data
from shared_data import KAMAJI_CHART
from upstream_data import FILES, KAMAJI_CHART_SOURCES, DownloadError, UpstreamFile, download, main, upstream_path

RELATIVE = "metallb/ipaddresspools.crd.yaml"


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No upstream folder anywhere: an empty GPULAB_UPSTREAM, no ../shared, an empty cache."""
    monkeypatch.setattr(upstream_data, "SHARED_UPSTREAM", tmp_path / "no-shared")
    monkeypatch.setattr(upstream_data, "CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("GPULAB_UPSTREAM", str(tmp_path / "empty"))
    upstream_data.find.cache_clear()
    yield tmp_path
    upstream_data.find.cache_clear()


def test_missing_data_skips_with_one_line_outside_ci(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GPULAB_UPSTREAM")
    with pytest.raises(pytest.skip.Exception) as skipped:
        upstream_path(RELATIVE)
    message = str(skipped.value)
    assert "\n" not in message
    assert message == f"upstream test data {RELATIVE} not found (run `make upstream-data`, or set GPULAB_UPSTREAM)"


def test_missing_data_never_says_set_gpulab_upstream_when_it_is_set(nowhere: Path) -> None:
    with pytest.raises(upstream_data.Missing) as missing:
        upstream_data.find(RELATIVE)
    assert str(missing.value) == (
        f"upstream test data {RELATIVE} not found, not even in GPULAB_UPSTREAM={nowhere / 'empty'} "
        "(run `make upstream-data`)"
    )


def test_missing_data_fails_in_ci(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        upstream_path(RELATIVE)
    assert RELATIVE in str(failed.value) and "CI must run every test" in str(failed.value)


def test_gpulab_upstream_comes_first_and_is_checksummed(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = nowhere / "empty"
    (folder / "metallb").mkdir(parents=True)
    (folder / RELATIVE).write_text("not the CRD\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        upstream_path(RELATIVE)
    assert "not the pinned" in str(failed.value), "a corrupt file is a failure, never a skip"


def test_a_good_file_is_found_in_the_cache(nowhere: Path) -> None:
    content = b"kind: CustomResourceDefinition\n"
    entry = UpstreamFile("x/crd.yaml", hashlib.sha256(content).hexdigest(), None)
    cache = nowhere / "no-cache"
    (cache / "x").mkdir(parents=True)
    (cache / "x" / "crd.yaml").write_bytes(content)
    FILES[entry.path] = entry
    try:
        assert upstream_path(entry.path) == cache / "x" / "crd.yaml"
    finally:
        del FILES[entry.path]


def test_every_file_has_a_checksum_and_a_pinned_source() -> None:
    for entry in FILES.values():
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256), entry.path
        if entry.url is not None:
            assert entry.url.startswith("https://"), entry.url
            assert "/master/" not in entry.url and "/main/" not in entry.url, f"{entry.url} is not pinned"
        else:
            assert entry.path == KAMAJI_CHART and re.fullmatch(r"[0-9a-f]{64}", entry.tar_sha256 or "")
    for source in KAMAJI_CHART_SOURCES:
        assert re.fullmatch(r"[0-9a-f]{40}", source.commit), f"{source.repo} is pinned by a full commit"


class Server:
    """A folder served over HTTP on loopback, remembering which paths were asked for."""

    def __init__(self, root: Path) -> None:
        self.root, self.requests = root, []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

            def log_message(self, *args) -> None:
                server.requests.append(self.path)

        class Listener(http.server.ThreadingHTTPServer):
            request_queue_size = 64  # the default backlog of 5 drops parallel connects (a 1 s SYN retry)

        self.http = Listener(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.http.server_address[1]}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    (tmp_path / "served").mkdir()
    served = Server(tmp_path / "served")
    thread = threading.Thread(target=served.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.http.shutdown()
        served.http.server_close()


@pytest.fixture
def served(server: Server) -> tuple[Path, str]:
    return server.root, server.base


def test_download_verifies_and_is_idempotent(served: tuple[Path, str], tmp_path: Path) -> None:
    root, base = served
    content = b"apiVersion: v1\n"
    (root / "file.yaml").write_bytes(content)
    entry = UpstreamFile("a/file.yaml", hashlib.sha256(content).hexdigest(), f"{base}/file.yaml")
    dest = tmp_path / "cache"
    assert download(entry, dest).startswith("fetched")
    assert (dest / "a" / "file.yaml").read_bytes() == content
    (root / "file.yaml").unlink()  # a second run needs no server
    assert download(entry, dest).startswith("ok")


def test_download_refuses_a_checksum_mismatch(served: tuple[Path, str], tmp_path: Path) -> None:
    root, base = served
    (root / "file.yaml").write_bytes(b"tampered\n")
    entry = UpstreamFile("a/file.yaml", "0" * 64, f"{base}/file.yaml")
    dest = tmp_path / "cache"
    with pytest.raises(DownloadError, match="not the pinned 0000"):
        download(entry, dest)
    assert not any(path.is_file() for path in dest.rglob("*")), "nothing of a refused file is kept"


def test_download_reports_an_unreachable_url(served: tuple[Path, str], tmp_path: Path) -> None:
    _, base = served
    entry = UpstreamFile("a/file.yaml", "0" * 64, f"{base}/missing.yaml")
    with pytest.raises(DownloadError, match=r"download from .* failed"):
        download(entry, tmp_path / "cache")
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*"))


def raw_github_from_the_archive(server: Server) -> dict[str, bytes]:
    """Serve every chart source file at its pinned repo/commit/path, taken from the team's archive (the same
    files as the two repositories at those commits: their git blob ids are pinned). Returns the archive's files."""
    with tarfile.open(upstream_path(KAMAJI_CHART)) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    served = set()
    for source in KAMAJI_CHART_SOURCES:
        for path in source.files():
            target = server.root / source.repo / source.commit / source.folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(members[f"{source.into}/{path}"])
            served.add(f"{source.into}/{path}")
    assert served == set(members), "the pinned source list is exactly the archive's files"
    return members


@pytest.mark.integration
def test_the_kamaji_chart_is_rebuilt_from_its_sources_at_the_pinned_commits(server: Server, tmp_path: Path) -> None:
    members = raw_github_from_the_archive(server)
    entry = FILES[KAMAJI_CHART]
    report = upstream_data.build_kamaji_chart(entry, tmp_path / "cache", time.monotonic() + 60, raw=server.base)
    rebuilt = tmp_path / "cache" / KAMAJI_CHART
    assert report.startswith(f"built    {KAMAJI_CHART} (52 files from clastix/kamaji@ddbabd87ed0e, ")
    assert upstream_data.matches(rebuilt, entry) is None, "find() accepts the rebuilt archive"
    with tarfile.open(rebuilt) as tar:  # what the tests read: the same files, byte for byte
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()} == members
    assert hashlib.sha256(gzip.decompress(rebuilt.read_bytes())).hexdigest() == entry.tar_sha256
    if shutil.which("gzip"):  # GNU gzip -n -6 packed the team's archive: the bytes are the same
        assert upstream_data.sha256_of(rebuilt) == entry.sha256 and "byte-identical" in report


def test_without_gnu_gzip_the_rebuilt_archive_holds_the_pinned_tar(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw_github_from_the_archive(server)
    monkeypatch.setattr(upstream_data.shutil, "which", lambda name: None)
    entry = FILES[KAMAJI_CHART]
    report = upstream_data.build_kamaji_chart(entry, tmp_path, time.monotonic() + 60, raw=server.base)
    assert report.endswith("the pinned tar, compressed by zlib)")
    assert upstream_data.sha256_of(tmp_path / KAMAJI_CHART) != entry.sha256
    assert upstream_data.matches(tmp_path / KAMAJI_CHART, entry) is None
    (tmp_path / "other.tgz").write_bytes(gzip.compress(b"not the chart"))
    assert upstream_data.matches(tmp_path / "other.tgz", entry) is not None, "another tar is refused"


def test_a_changed_chart_source_is_refused_and_nothing_is_kept(server: Server, tmp_path: Path) -> None:
    raw_github_from_the_archive(server)
    source = KAMAJI_CHART_SOURCES[1]
    values = server.root / source.repo / source.commit / source.folder / "values.yaml"
    values.write_text(values.read_text() + "# changed\n")
    with pytest.raises(DownloadError, match=r"kamaji-etcd/values.yaml served a file with git blob id \w+, not d63c82e"):
        upstream_data.build_kamaji_chart(FILES[KAMAJI_CHART], tmp_path / "cache", time.monotonic() + 60, server.base)
    assert not (tmp_path / "cache").exists()


@pytest.fixture
def originals() -> dict[str, bytes]:
    """Two real upstream files (read before `nowhere` hides every folder: list this fixture first)."""
    return {relative: upstream_path(relative).read_bytes() for relative in (RELATIVE, "pulumi/project.schema.json")}


def copy_of(originals: dict[str, bytes], folder: Path) -> None:
    for relative, content in originals.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(content)


def test_make_upstream_data_uses_a_complete_copy_and_downloads_nothing(
    originals: dict[str, bytes], nowhere: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = [FILES[relative] for relative in originals]
    copy_of(originals, nowhere / "copy")
    monkeypatch.setenv("GPULAB_UPSTREAM", str(nowhere / "copy"))
    monkeypatch.setattr(upstream_data, "fetch", lambda url, deadline: pytest.fail(f"downloaded {url}"))
    assert main(["--dest", str(nowhere / "cache")], files=files) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(f"upstream-data: 2 of 2 files ready (2 already in {nowhere / 'copy'}), 0 failed, in ")
    assert len(out) == 1 and not (nowhere / "cache").exists()


def test_make_upstream_data_downloads_only_what_is_missing(
    originals: dict[str, bytes], nowhere: Path, server: Server, capsys
) -> None:
    """GPULAB_UPSTREAM is set and has one of the two files: only the other one is downloaded."""
    copy_of({RELATIVE: originals[RELATIVE]}, nowhere / "empty")
    content = originals["pulumi/project.schema.json"]
    (server.root / "schema.json").write_bytes(content)
    fetched = UpstreamFile("pulumi/schema.json", hashlib.sha256(content).hexdigest(), f"{server.base}/schema.json")
    files = [FILES[RELATIVE], fetched]
    assert main(["--dest", str(nowhere / "cache")], files=files) == 0
    out = capsys.readouterr().out.splitlines()
    assert server.requests == ["/schema.json"]
    assert out[0] == "fetched  pulumi/schema.json"
    assert out[-1].startswith(
        f"upstream-data: 2 of 2 files ready (1 already in {nowhere / 'empty'}; 1 fetched into {nowhere / 'cache'}), "
        "0 failed, in "
    )
    assert "set GPULAB_UPSTREAM" not in "\n".join(out)


def test_make_upstream_data_gives_up_at_its_deadline(nowhere: Path, capsys) -> None:
    """A server that accepts connections and never answers (the kernel completes the handshake) cannot hold
    the run past its deadline; the summary still comes, and the exit code is 1."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        files = [UpstreamFile(f"x/{i}.yaml", "0" * 64, f"http://127.0.0.1:{port}/{i}.yaml") for i in range(6)]
        started = time.monotonic()
        code = main(["--dest", str(nowhere / "cache"), "--deadline", "0.5"], files=files)
        elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    assert code == 1 and elapsed < 30, elapsed  # 0.5 s promised against a server silent for good; a loaded margin
    assert captured.err.count("error    ") == 6 and "error    x/0.yaml: download from http://127.0.0.1" in captured.err
    assert captured.out.splitlines()[-1].startswith("upstream-data: 0 of 6 files ready (none), 6 failed, in ")
    assert not any(path.is_file() for path in (nowhere / "cache").rglob("*"))


def test_make_upstream_data_reports_a_corrupt_copy_instead_of_hiding_it(nowhere: Path, capsys) -> None:
    (nowhere / "empty" / "metallb").mkdir(parents=True)
    (nowhere / "empty" / RELATIVE).write_text("not the CRD\n")
    assert main(["--dest", str(nowhere / "cache")], files=[FILES[RELATIVE]]) == 1
    captured = capsys.readouterr()
    assert f"error    {nowhere / 'empty' / RELATIVE} has sha256 " in captured.err and "replace it" in captured.err
    assert not (nowhere / "cache").exists()
