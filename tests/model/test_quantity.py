"""model/quantity.py against the API server's own quantity rules (k8s.io/apimachinery resource/quantity.go):
a whole number read without a suffix comes back with the largest SI suffix that leaves a whole mantissa. The
real API server is the judge in tests/real/test_control_plane.py; here the rule and its round trip."""

from __future__ import annotations

import pytest

from model.quantity import canonical_whole, parse_quantity


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (0, "0"),
        (8, "8"),
        (150, "150"),
        (1000, "1k"),
        (1500, "1500"),
        (20000, "20k"),
        (40960, "40960"),
        (81920, "81920"),
        (1_000_000, "1M"),
        (2_500_000, "2500k"),
        (10**18, "1E"),
    ],
)
def test_a_whole_number_is_written_as_the_api_server_writes_it(value: int, written: str) -> None:
    assert canonical_whole(value) == written


@pytest.mark.parametrize("value", [*range(0, 3001, 7), 20000, 49152, 81920, 123_000_000, 10**15])
def test_the_written_form_reads_back_as_the_same_number(value: int) -> None:
    assert parse_quantity(canonical_whole(value)) == value
