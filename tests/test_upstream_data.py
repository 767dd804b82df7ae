"""Where upstream test data is found, how its absence reads (skip outside CI, failure in CI), and
`make upstream-data`'s downloader, against a server on loopback."""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import upstream_data
from upstream_data import FILES, DownloadError, UpstreamFile, download, upstream_path

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
    with pytest.raises(pytest.skip.Exception) as skipped:
        upstream_path(RELATIVE)
    message = str(skipped.value)
    assert "\n" not in message
    assert message == f"upstream test data {RELATIVE} not found (run `make upstream-data`, or set GPULAB_UPSTREAM)"


def test_missing_data_fails_in_ci(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        upstream_path(RELATIVE)
    assert RELATIVE in str(failed.value) and "CI must run every test" in str(failed.value)


def test_the_kamaji_archive_says_it_has_no_download(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        upstream_path("charts/kamaji-0.0.0+latest-26.8.2-edge.tgz")
    assert "no public URL serves this exact archive" in str(skipped.value)


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


def test_every_file_has_a_checksum_and_a_pinned_url() -> None:
    for entry in FILES.values():
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256), entry.path
        if entry.url is not None:
            assert entry.url.startswith("https://"), entry.url
            assert "/master/" not in entry.url and "/main/" not in entry.url, f"{entry.url} is not pinned"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on loopback: (folder, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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
