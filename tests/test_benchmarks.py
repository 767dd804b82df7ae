"""The benchmarks (`make bench`) still run: each at a tiny size, so they cannot rot unnoticed."""

from __future__ import annotations

import sys

from shared_data import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import policy_check
import program_under_mocks


def test_program_benchmark_runs(capsys) -> None:
    program_under_mocks.main(sizes=(3,))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["tenants", "resources", "seconds", "ms/tenant"]
    assert lines[1].split()[0] == "3"


def test_policy_benchmark_runs(capsys) -> None:
    policy_check.main(tenants=2, pods=40, adversarial=3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("40 pods across 2 tenants:")
    assert lines[1].startswith(f"  baseline {policy_check.BASELINE}:") and "x faster" in lines[1], lines[1]
    assert lines[1].split(",")[1].split(";")[0].strip() == lines[0].rsplit(",", 1)[1].strip(), "same error count"
    assert lines[2].startswith("3 adversarial small cases: slowest call")
    assert lines[3].startswith("40 pods across 2 tenants x 4 GPU nodes x 8 cards:") and "ratio" in lines[3], lines[3]
    assert "), 0 errors; one node of 32 cards:" in lines[3] and lines[3].count(", 0 errors") == 2, lines[3]
    assert lines[4].startswith("3 adversarial small multi-node cases: slowest call")


def test_image_pull_benchmark_runs(capsys) -> None:
    import image_pulls

    image_pulls.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["tenants", "naive", "pulls"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == ["2", "10", "50"]
    assert len({row[3] for row in rows}) == 1, "pre-loaded pulls do not grow with tenants"
    assert int(rows[0][4]) < 10, "the reference lab stays under Docker Hub's anonymous hourly limit"
