"""One file from an upstream site over HTTPS, for `make cache` (hack/source_cache.py) and `make tools`' release
files (tools/releases.py). Standard library only: make tools runs before ./venv exists.

GPULAB_SOURCE_MIRROR, when set, serves upstream's sites from a mirror laid out as `<mirror>/<host>/<path>`. A host
that does not answer within GPULAB_CONNECT_TIMEOUT seconds (10) is given up at once: the connection, the TLS
handshake and every read are bounded by it (urllib's socket timeout), so nothing hangs on a silent server.
"""

from __future__ import annotations

import os
import shutil
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path


class Unreachable(Exception):
    """The host did not answer (no route, no name, refused, or silent past the timeout)."""


class Refused(Exception):
    """The host answered with an HTTP error (the file is not there, or not for us)."""


def mirrored(url: str) -> str:
    mirror = os.environ.get("GPULAB_SOURCE_MIRROR", "").rstrip("/")
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f"{mirror}/{parts.netloc}{parts.path}"


def connect_timeout() -> float:
    return float(os.environ.get("GPULAB_CONNECT_TIMEOUT", "10"))


def download(url: str, dest: Path) -> str:
    """url (or its mirror) into dest; returns what was asked (the mirror's URL when there is one). Python's
    default TLS context: the system's CAs, or SSL_CERT_FILE's."""
    source = mirrored(url)
    try:
        context = ssl.create_default_context()
        opened = urllib.request.urlopen(source, timeout=connect_timeout(), context=context)
        with opened as answer, dest.open("wb") as out:
            shutil.copyfileobj(answer, out, 1 << 20)
    except urllib.error.HTTPError as error:
        raise Refused(f"{source}: the server answered {error.code} {error.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise Unreachable(f"{source} cannot be reached from this host ({reason})") from None
    return source
