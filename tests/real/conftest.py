"""The real-programs tier (temporary fixture; merged with the judges branch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from process_lab.control_plane import missing_programs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def real_bin() -> Path:
    bin_dir = Path(os.environ.get("GPULAB_BIN", ROOT / "bin"))
    missing = missing_programs(bin_dir)
    if missing:
        pytest.skip(f"real programs not built ({', '.join(missing)}): run `make tools`")
    return bin_dir
