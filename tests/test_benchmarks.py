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


def fake_proc(root, processes: dict[int, tuple[list[str], int, int]]):
    """A /proc of the given processes (argv, VmRSS kB, Pss kB), in the layout proc(5) gives."""
    root.mkdir()
    for pid, (argv, rss, pss) in processes.items():
        entry = root / str(pid)
        entry.mkdir()
        (entry / "cmdline").write_bytes(b"\0".join(word.encode() for word in argv) + b"\0")
        (entry / "status").write_text(f"Name:\tx\nVmHWM:\t{rss + 5} kB\nVmRSS:\t{rss} kB\n")
        (entry / "smaps_rollup").write_text(f"00400000-ff [rollup]\nRss:\t{rss} kB\nPss:\t{pss} kB\nPss_Anon:\t1 kB\n")
    (root / "self").mkdir()
    return root


def test_memory_is_summed_per_program_of_the_tenant_and_nothing_else(tmp_path) -> None:
    import memory

    folder = tmp_path / "lab" / "t0"
    proc = fake_proc(
        tmp_path / "proc",
        {
            10: (["/bin/etcd", f"--data-dir={folder}/etcd"], 50_000, 40_000),
            11: (["/bin/kube-apiserver", "--etcd-servers", "x", "--cert-dir", f"{folder}/pki"], 300_000, 200_000),
            12: (["/usr/bin/python3", "-m", "process_lab.device_plugin", "t0", "/bin", str(folder)], 30_000, 20_000),
            13: (["/bin/kube-apiserver", "--cert-dir", f"{tmp_path}/lab/t1/pki"], 300_000, 200_000),  # another tenant
            14: (["/bin/etcd", f"--data-dir={tmp_path}/lab/t00/etcd"], 50_000, 40_000),  # t00 is not t0
        },
    )
    usage = memory.by_program(folder, proc)
    assert usage == {
        "bind-time role": memory.Usage(30_000, 20_000),
        "etcd": memory.Usage(50_000, 40_000),
        "kube-apiserver": memory.Usage(300_000, 200_000),
    }
    lines = memory.table([usage])
    assert lines[-1].split() == ["per", "tenant", "371", "254"]
    assert memory.available_kb("MemTotal: 10 kB\nMemFree: 5 kB\nMemAvailable: 7 kB\n") == 7
