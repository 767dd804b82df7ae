"""The checkout's ./bin, which hack/prereqs.sh installs into (`make up`, `make down`), for the tests that run it there.

One such test at a time, across workers, and ./bin left as it was found. Two at once raced: one test removed the
empty ./bin it had made while another's prereqs.sh opened its install lock there (`bin/.install.lock: No such file
or directory`, seen with two workers), or found the other's partial download in it.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

import pytest
from shared_data import ROOT

BIN = ROOT / "bin"
INSTALL_LOCK = BIN / ".install.lock"  # hack/prereqs.sh's own lock, which its flock holds while it installs


@contextlib.contextmanager
def the_checkouts_bin(needs_it_empty: bool = False) -> Iterator[None]:
    """Holds ./bin for the caller; afterwards removes the install lock and the empty ./bin if they were not there
    before. needs_it_empty: skip where ./bin already holds programs (make up would find them and download nothing)."""
    ours = ROOT / ".cache" / "tests-checkout-bin.lock"
    ours.parent.mkdir(parents=True, exist_ok=True)
    with ours.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if needs_it_empty and any(path != INSTALL_LOCK for path in BIN.glob("*")):
            pytest.skip("./bin holds programs here: `make up` may find the pinned CLIs in it and download nothing")
        had_bin, had_lock = BIN.is_dir(), INSTALL_LOCK.exists()
        try:
            yield
        finally:
            if not had_lock:
                INSTALL_LOCK.unlink(missing_ok=True)
            if not had_bin and BIN.is_dir() and not any(BIN.iterdir()):
                BIN.rmdir()
