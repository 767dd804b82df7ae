"""boundary/downloads.py's bounds, against servers that misbehave as real ones do: one that sends its headers and
then a byte now and then (a crawling transfer, each read within the per-read timeout), one that promises a length
and closes early (http.client hands back the short body without an error), and a setting that is not a number.
Plain HTTP servers on 127.0.0.1: the bounds are the same for HTTPS (tests/tools/test_releases.py has the TLS
server and the host that never answers)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from boundary import downloads


def serve_once(behaviour) -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def run() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                try:
                    connection.recv(65536)
                    behaviour(connection, stop)
                except OSError:  # the client hung up: what a bounded download does on purpose
                    pass

    server = threading.Thread(target=run, daemon=True)
    server.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    # The listener is closed once the server has left accept() (0.2 s at most): closed under it, accept() raised
    # EBADF in the thread (seen beside two busy loops as pytest's unhandled-thread-exception warning).
    server.join(timeout=10)
    assert not server.is_alive(), "the test server did not stop within 10 s of being asked"
    listener.close()


@pytest.fixture
def crawling() -> Iterator[str]:
    def behaviour(connection: socket.socket, stop: threading.Event) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while not stop.is_set():
            connection.sendall(b"x")
            stop.wait(0.3)

    yield from serve_once(behaviour)


@pytest.fixture
def cut_short() -> Iterator[str]:
    def behaviour(connection: socket.socket, stop: threading.Event) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")

    yield from serve_once(behaviour)


def test_a_transfer_that_crawls_is_given_up_at_the_download_bound(
    crawling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULAB_SOURCE_MIRROR", crawling)
    monkeypatch.setenv("GPULAB_CONNECT_TIMEOUT", "1")  # every read comes within it
    monkeypatch.setenv("GPULAB_DOWNLOAD_TIMEOUT", "1.5")
    with pytest.raises(downloads.Unreachable, match=r"the transfer did not finish within 1.5 s"):
        downloads.download("https://dl.example/file", tmp_path / "file")


def test_a_body_cut_short_is_a_failed_transfer_not_a_file(
    cut_short: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULAB_SOURCE_MIRROR", cut_short)
    with pytest.raises(downloads.Unreachable, match=r"cut off after 10 of 100 bytes"):
        downloads.download("https://dl.example/file", tmp_path / "file")


@pytest.mark.parametrize("value", ["ten", "0", "-3"])
def test_a_timeout_setting_that_is_not_a_positive_number_is_named(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULAB_CONNECT_TIMEOUT", value)
    with pytest.raises(ValueError, match=rf"GPULAB_CONNECT_TIMEOUT='{value}': give a number of seconds above 0"):
        downloads.download("https://dl.example/file", tmp_path / "file")
    assert not (tmp_path / "file").exists(), "refused before any file or connection"


def test_nothing_is_left_waiting_once_a_bound_expires(crawling: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GPULAB_SOURCE_MIRROR", crawling)
    monkeypatch.setenv("GPULAB_DOWNLOAD_TIMEOUT", "1")
    with pytest.raises(downloads.Unreachable):
        downloads.download("https://dl.example/file", tmp_path / "file")
    left = [t for t in threading.enumerate() if t.name.startswith("download ")]
    assert left and all(t.daemon for t in left), "a transfer left behind must not keep the process alive"
