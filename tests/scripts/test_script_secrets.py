"""A secret handed to a script in its environment never reaches another process.

pulumi-command hands an update or a delete the Command's previous stdout in PULUMI_COMMAND_STDOUT (for
states from before kind's record, the management kubeconfig). lib.sh starts the script again without it
(exec), but whatever the script forks before that carries it: a child's /proc/PID/environ is the environment
its execve was given, and a forked subshell keeps its parent's (proc(5)). kind-delete.sh's
`source "$(dirname "$0")/lib.sh"` forked once, and under load a /proc scan saw the kubeconfig in a child.

Boundary: the kernel's process creation as strace(1) records it: every clone/fork/vfork and every execve
with its whole environment, for every process of the run. That is exact on any machine, loaded or not,
where a /proc scan only samples.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from shared_data import ROOT

from tests.scripts.test_scripts import FAKES, KIND, KUBECONFIG

SECRET = "client-key-data: SECRET-OF-THE-PREVIOUS-STDOUT-4f1c"
LIB = 'source "${BASH_SOURCE[0]%/*}/lib.sh"'
SOURCES_LIB = re.compile(r"^source .*/lib\.sh", re.MULTILINE)
SCRIPTS = sorted(path.name for path in (ROOT / "scripts").glob("*.sh") if SOURCES_LIB.search(path.read_text()))


# make's and CI's scripts source it from scripts/ (hack/, node-image/).
LIB_FROM_BESIDE = 'source "${BASH_SOURCE[0]%/*}/../scripts/lib.sh"'
EVERY_SCRIPT = [
    path
    for folder in ("scripts", "hack", "node-image")
    for path in sorted((ROOT / folder).glob("*.sh"))
    if SOURCES_LIB.search(path.read_text())
]


def test_every_script_sources_lib_sh_before_anything_runs() -> None:
    """Before lib.sh only comments and `set`: nothing there can fork (a command substitution, a pipeline)."""
    assert len(SCRIPTS) >= 20, SCRIPTS
    assert len(EVERY_SCRIPT) >= len(SCRIPTS) + 4, EVERY_SCRIPT
    for path in EVERY_SCRIPT:
        name, text = str(path.relative_to(ROOT)), path.read_text()
        lib = LIB if path.parent.name == "scripts" else LIB_FROM_BESIDE
        assert lib in text, f"{name} sources lib.sh another way: {SOURCES_LIB.search(text).group(0)}"
        before = text.split(lib, 1)[0].splitlines()
        code = [line for line in before if line.strip() and not line.startswith("#")]
        assert code == ["set -euo pipefail"], (name, code)


def traced_run(name: str, tmp_path: Path) -> str:
    log = tmp_path / "strace.log"
    env = {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "FAKE_DIR": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "GPULAB_POLL_INTERVAL": "0.05",
        "TIMEOUT": "1",
        "PULUMI_COMMAND_STDOUT": f"apiVersion: v1\nusers:\n- user:\n    {SECRET}\n",
        "PULUMI_COMMAND_STDERR": "[gpulab] previous stderr\n",
        **KIND,
    }
    argv = ["strace", "-f", "-qq", "-v", "-s", "65536", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", str(log)]
    subprocess.run(
        [*argv, "bash", str(ROOT / "scripts" / name)],
        input=KUBECONFIG,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return log.read_text()


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("strace") is None and not os.environ.get("CI"), reason="strace is not installed")
@pytest.mark.parametrize("name", SCRIPTS)
def test_no_process_but_the_script_itself_ever_holds_the_previous_stdout(tmp_path: Path, name: str) -> None:
    """Every process the run makes, to its end, whatever the script does with the fakes: the secret is in
    the environment of the script's first execve (pulumi-command's, as given) and of lib.sh's `exec env -u`,
    both in the script's own process, and nowhere else; and that process forks nothing before it drops it."""
    lines = traced_run(name, tmp_path).splitlines()
    first = int(lines[0].split()[0])
    holders = {int(line.split()[0]) for line in lines if SECRET.split(": ")[1] in line}
    assert holders == {first}, f"{name}: processes {sorted(holders - {first})} got the secret"
    dropped = next(
        index
        for index, line in enumerate(lines)
        if int(line.split()[0]) == first and "execve(" in line and "PULUMI_COMMAND_STDOUT" not in line
    )
    forks = [
        line for line in lines[:dropped] if int(line.split()[0]) == first and re.search(r"\b(clone3?|v?fork)\(", line)
    ]
    assert not forks, f"{name} forked before lib.sh dropped the secret: {forks[0][:200]}"
