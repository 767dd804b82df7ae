"""How the program's cost grows with tenants: evaluate __main__.py under mocks for 2, 10 and 50.

A benchmark, not a test: it prints timings and asserts only that every tenant was declared.
Run with `make bench`: `PYTHONPATH=tests/support venv/bin/python -m benchmarks.program_under_mocks`, tests/support
on the path as pytest puts it, for the tests' harness (lab_harness).
"""

from __future__ import annotations

import time

from lab_harness import lab_config, make_tenant, run_program

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def measure(tenants: int) -> tuple[float, int]:
    # Tenant CIDRs must stay clear of each other's index range; 10.X.0.0/16 with X < 100 + tenants.
    config = lab_config(tenants=[make_tenant(f"t{i}", i) for i in range(tenants)])
    started = time.perf_counter()
    program = run_program(config)
    elapsed = time.perf_counter() - started
    assert len(program.of_type(TCP)) == tenants
    return elapsed, len(program.registrations)


def main(sizes: tuple[int, ...] = (2, 10, 50)) -> None:
    print(f"{'tenants':>8} {'resources':>10} {'seconds':>8} {'ms/tenant':>10}")
    for tenants in sizes:
        elapsed, resources = measure(tenants)
        print(f"{tenants:>8} {resources:>10} {elapsed:>8.2f} {1000 * elapsed / tenants:>10.1f}")


if __name__ == "__main__":
    main()
