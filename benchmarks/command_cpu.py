"""Where the CPU of one command goes: `make up STACK=many`'s engine and the lab it leaves running.

Runs the command as a child and reads CPU seconds (benchmarks/cpu.py) before and after: the command's own tree
(make, the Pulumi engine, its language host and providers, and every kwokctl, kubectl and openssl run they waited
for: `its reaped children`), and per program the processes still running in the lab's folder (each tenant's
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller, hami-scheduler, bind-time role).
A process started detached that ended before the second sample is not counted (none of the lab's should).

Usage: venv/bin/python -m benchmarks.command_cpu --folder .state/process/many -- make up STACK=many
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True, help="the lab's folder: its processes name it")
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args(argv)
    folder = args.folder.resolve()
    before = cpu.sample(folder)
    started = time.monotonic()
    code = subprocess.run(args.command, check=False).returncode
    wall = time.monotonic() - started
    spent = cpu.spent(before, cpu.sample(folder))
    spent[f"the command's tree ({args.command[0]})"] = spent.pop(cpu.REAPED)
    spent.pop(cpu.OWN)
    print(f"`{' '.join(args.command)}`: exit {code} after {wall:.0f} s", flush=True)
    print("\n".join(cpu.table(dict(sorted(spent.items(), key=lambda item: -item[1])), wall)))
    return code


if __name__ == "__main__":
    sys.exit(main())
