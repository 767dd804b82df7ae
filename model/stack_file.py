"""Is STACK one of this project's stacks (a `Pulumi.<STACK>.yaml` beside Pulumi.yaml)? The one message for a
stack name that is not, for every command that takes STACK (make plan, up, verify, report, diagnose, check,
and python -m preview / diagnose).

Standard library only: the Makefile runs it with the host's python3 before anything is installed.
usage: python3 -m model.stack_file STACK [PROJECT_DIR]; exit 0 the file exists, 2 it does not (one line why).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What Pulumi accepts in a stack name, and nothing that could leave the project folder as a path.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}", re.ASCII)


def make_up(stack: str) -> str:
    """The command that makes this stack's lab: a hint for another stack would build another lab (the Docker
    lab for `dev`, which pulls images, when a process-mode user meant `sim`)."""
    return "make up" if stack == "dev" else f"make up STACK={stack}"


def stacks(project: Path = ROOT) -> list[str]:
    """The project's stacks: the names of its Pulumi.<name>.yaml files, sorted."""
    return sorted(path.name[len("Pulumi.") : -len(".yaml")] for path in project.glob("Pulumi.?*.yaml"))


def stack_problem(stack: str, project: Path = ROOT) -> str | None:
    """None when Pulumi.<stack>.yaml exists; otherwise one line: what is wrong and what to do."""
    if not STACK_NAME.fullmatch(stack) or stack.strip(".") == "":
        return (
            f"stack name {stack[:60]!r} is not valid: use letters, digits, '-', '_' and '.' "
            f"(STACK=NAME picks Pulumi.NAME.yaml)"
        )
    if (project / f"Pulumi.{stack}.yaml").is_file():
        return None
    known = ", ".join(stacks(project)) or "none"
    return (
        f"no stack {stack!r}: there is no Pulumi.{stack}.yaml in {project}. Stacks here: {known}. "
        f"Pick one with STACK=NAME, or copy Pulumi.dev.yaml to Pulumi.{stack}.yaml to make a new one"
    )


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    problem = stack_problem(argv[0], Path(argv[1]) if len(argv) > 1 else ROOT)
    if problem:
        print(f"[gpulab] {problem}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
