"""One file from an upstream site over HTTPS, for `make cache` (hack/source_cache.py) and `make tools`' release
files (tools/releases.py). Standard library only: make tools runs before ./venv exists.

GPULAB_SOURCE_MIRROR, when set, serves upstream's sites from a mirror laid out as `<mirror>/<host>/<path>`.
Two bounds, so that nothing hangs on a host that does not answer or a transfer that crawls:
- GPULAB_CONNECT_TIMEOUT seconds (10) for the answer: the name lookup, every address tried, the TLS handshake,
  each redirect and the response's headers, together (urllib's socket timeout bounds each step alone, not the
  lookup, and starts again for every address and redirect);
- GPULAB_DOWNLOAD_TIMEOUT seconds (900) for the whole file; each read is bounded by the connect timeout too.
The transfer runs in a daemon thread that is left behind when a bound expires (Python cannot stop a thread
blocked in a lookup): the caller goes on, and the thread ends with the process.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CHUNK = 1 << 20


class Unreachable(Exception):
    """The host did not answer, or the transfer did not finish (no route, no name, refused, silent, cut off)."""


class Refused(Exception):
    """The host answered with an HTTP error (the file is not there, or not for us)."""


def mirrored(url: str) -> str:
    mirror = os.environ.get("GPULAB_SOURCE_MIRROR", "").rstrip("/")
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f"{mirror}/{parts.netloc}{parts.path}"


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "")
    try:
        value = float(text) if text else default
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise ValueError(f"{name}={text!r}: give a number of seconds above 0 (default {default:g})")
    return value


def connect_timeout() -> float:
    return _seconds("GPULAB_CONNECT_TIMEOUT", 10)


def download_timeout() -> float:
    return _seconds("GPULAB_DOWNLOAD_TIMEOUT", 900)


def download(url: str, dest: Path) -> str:
    """url (or its mirror) into dest; returns what was asked (the mirror's URL when there is one). Python's
    default TLS context: the system's CAs, or SSL_CERT_FILE's. A write to dest that fails (a full disk) raises
    its own OSError: it is not the host's fault."""
    source = mirrored(url)
    answer_within, finish_within = connect_timeout(), download_timeout()
    answered, finished = threading.Event(), threading.Event()
    outcome: dict[str, BaseException] = {}
    out = dest.open("wb")

    def transfer() -> None:
        try:
            context = ssl.create_default_context()
            with urllib.request.urlopen(source, timeout=answer_within, context=context) as response:
                answered.set()
                expected, received = response.headers.get("Content-Length"), 0
                while chunk := response.read(CHUNK):
                    try:
                        out.write(chunk)
                    except OSError as error:  # ours, not the host's (a full disk)
                        outcome["local"] = error
                        return
                    received += len(chunk)
                if expected is not None and expected.isdigit() and received != int(expected):
                    # http.client returns a short body without an error when the server closes early.
                    outcome["error"] = Unreachable(f"{source}: cut off after {received} of {expected} bytes")
        except BaseException as error:
            outcome["error"] = error
        finally:
            answered.set()
            finished.set()

    start = time.monotonic()
    worker = threading.Thread(target=transfer, name=f"download {source}", daemon=True)
    try:
        worker.start()
        if not answered.wait(answer_within):
            raise Unreachable(f"{source} cannot be reached from this host (no answer within {answer_within:g} s)")
        if not finished.wait(max(0.0, finish_within - (time.monotonic() - start))):
            raise Unreachable(f"{source}: the transfer did not finish within {finish_within:g} s")
    finally:
        if finished.is_set():
            out.close()
    if "local" in outcome:
        raise outcome["local"]
    error = outcome.get("error")
    if isinstance(error, urllib.error.HTTPError):
        raise Refused(f"{source}: the server answered {error.code} {error.reason}") from None
    if isinstance(error, Unreachable):
        raise error
    if isinstance(error, (urllib.error.URLError, OSError, TimeoutError)):
        reason = getattr(error, "reason", error)
        raise Unreachable(f"{source} cannot be reached from this host ({reason})") from None
    if error is not None:
        raise error
    return source
