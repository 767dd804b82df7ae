"""hami/'s conformance tests import the package as the policy pack does, from the project root."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
