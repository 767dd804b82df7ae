"""The Makefile as README presents it: `make help` lists every target README tells users to run, `make plan`
fails through make for a refusal and for an invalid stack alike and says which (the preview itself
keeps 1 and 2 apart), and `make verify` / `make report` say "no lab" before
installing anything."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lab_harness import LAB_PROJECT
from shared_data import ROOT

from preview.__main__ import main as plan_main

# `make [VAR=value ...] target` at the start of a command (a line of a code block, or an inline code span).
MAKE_COMMAND = re.compile(r"(?:^|[;&|(]\s*|\$ )make((?:\s+[A-Z_]+=\S*)*)\s+([a-z][a-z-]*)")


def commands_in(markdown: str) -> list[str]:
    """The shell commands a Markdown text shows: lines of fenced code blocks (comments dropped) and inline code."""
    commands, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            commands.append(line.split(" #", 1)[0].strip())
        else:
            commands.extend(span.strip() for span in re.findall(r"`([^`]+)`", line))
    return commands


def make_targets_in(markdown: str) -> set[str]:
    return {match.group(2) for command in commands_in(markdown) for match in MAKE_COMMAND.finditer(command)}


def help_targets() -> set[str]:
    result = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return {match.group(1) for match in re.finditer(r"^make ([a-z][a-z-]*)\s", result.stdout, re.MULTILINE)}


def test_the_readme_parser_finds_commands_not_prose() -> None:
    text = (
        "Run `make PYTHON_HOST=python3.12 up`, or `make check TENANT=a FILES=b`; HAMi will make of it 20 GB.\n"
        "```\nmake test               # ~1 minute\nexport X=1   # what make sets for you\n$ make verify\n```\n"
    )
    assert make_targets_in(text) == {"up", "check", "test", "verify"}


def user_docs() -> str:
    """README and docs/: what users read (depth moved from README to docs/)."""
    return "\n".join(path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


@pytest.mark.integration
def test_make_help_lists_every_target_readme_tells_users_to_run() -> None:
    mentioned = make_targets_in(user_docs())
    assert {"up", "plan", "test", "policy-venv", "upstream-data"} <= mentioned, "the README parser lost track"
    missing = mentioned - help_targets() - {"help"}
    assert not missing, f"README tells users to run these, `make help` does not list them: {sorted(missing)}"


@pytest.mark.integration
def test_readme_use_it_lists_exactly_the_targets_of_make_help() -> None:
    """Boundary: README's and docs/usage.md's target blocks, `make help  # every target`, against `make help`."""
    for text in ((ROOT / "README.md").read_text(), (ROOT / "docs" / "usage.md").read_text()):
        start = text.index("make help               # every target")
        block = text[start : text.index("```", start)]
        assert make_targets_in(f"```\n{block}```\n") - {"help"} == help_targets()


def test_readme_fits_in_five_minutes() -> None:
    """README is the what, the quick start and where to read on; depth lives in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"\]\((docs/[a-z-]+\.md|tools/README\.md)(?:#[a-z0-9-]+)?\)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links


def test_docs_link_only_to_what_exists() -> None:
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", path.read_text()):
            assert (path.parent / target).is_file(), f"{path.name} links to {target}, which is not there"


def test_readme_runs_gpulab_s_modules_with_the_venv_s_python() -> None:
    """Boundary: the commands README shows for gpulab's own modules, spelled one way (the venv's python has
    gpulab's dependencies and finds it from any folder; a bare `python` may be the host's)."""
    readme = user_docs()
    modules = "policies|preview|diagnose|report|model"
    assert re.findall(rf"venv/bin/python -m (?:{modules})\b", readme), "the pattern lost track"
    bare = re.findall(rf"(?<![\w/.])(?:\./)?(?:python3?|\./venv/bin/python) -m (?:{modules})\b", readme)
    assert not bare, bare


def make_plan(stack: str, path: Path, change) -> subprocess.CompletedProcess:
    document = yaml.safe_load((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    change(document["config"])
    path.write_text(yaml.safe_dump(document))
    return subprocess.run(
        ["make", "--no-print-directory", "plan", f"STACK={stack}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.integration
def test_make_plan_fails_on_a_policy_refusal_and_says_so(project_stack_file: tuple[str, Path]) -> None:
    fourth = {"name": "trainer-4", "gpumem": 20000, "gpucores": 30}
    result = make_plan(*project_stack_file, lambda c: c["gpulab:tenants"][0]["workloads"].append(fourth))
    assert result.returncode == 2, result.stdout[-500:] + result.stderr  # GNU make's code for a failed recipe
    assert result.stdout.splitlines()[-1] == "verdict: a mandatory policy refuses this stack"
    assert "CardInsufficientCore" in result.stdout, "the preview's report reaches make's stdout"
    # The preview itself tells a refusal (1) from an invalid stack (2); its process exits with main()'s code,
    # which the next test sees through a process. Here in-process: a second program run in a process costs 2 s.
    assert plan_main(["--stack", project_stack_file[0]]) == 1, "the preview itself tells a refusal"


@pytest.mark.integration
def test_make_plan_fails_on_an_invalid_stack_naming_the_key(project_stack_file: tuple[str, Path]) -> None:
    result = make_plan(*project_stack_file, lambda c: c["gpulab:tenants"][0]["gpus"][0].update(model="A200"))
    assert result.returncode == 2, result.stdout[-500:] + result.stderr
    assert "gpulab:tenants[0].gpus[0].model = 'A200': unknown GPU model" in result.stderr
    direct = subprocess.run(
        [sys.executable, "-m", "preview", "--stack", project_stack_file[0]], cwd=ROOT, capture_output=True, text=True
    )
    assert direct.returncode == 2


@pytest.mark.integration
@pytest.mark.parametrize("target", ["verify", "report"])
def test_without_a_lab_verify_and_report_say_so_before_installing_anything(
    tmp_path: Path, target: str, project_stack_file: tuple[str, Path]
) -> None:
    """Through make, as README says: exit 2 (make's own code for a failed recipe) and one line of ours."""
    name, path = project_stack_file
    path.write_text((LAB_PROJECT / "Pulumi.dev.yaml").read_text())
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "--no-print-directory", target, f"VENV={venv}", f"STACK={name}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}"},
        timeout=60,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if not line.startswith("make: ***")]
    hint = f"run `make up STACK={name}` first"  # the stack it was given: `make up` alone builds the dev lab
    assert lines == [f"[gpulab] no lab: stack '{name}' has nothing deployed in {tmp_path}; {hint}"], result.stderr
    assert not venv.exists(), "nothing installed only to say there is no lab"


@pytest.mark.integration
def test_make_clean_keeps_the_source_cache(tmp_path: Path) -> None:
    """A source cache may have been filled on another machine (docs/offline.md): `make clean` removes every
    other cache under .cache, and the build folders, but not .cache/sources."""
    for folder in (".cache/sources/images", ".cache/pycache", ".cache/upstream", "bin", "reports"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / ".cache/sources/index.json").write_text("{}")
    (tmp_path / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    subprocess.run(["make", "-s", "clean"], cwd=tmp_path, check=True, capture_output=True, timeout=60)
    left = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    assert left == [".cache", ".cache/sources", ".cache/sources/images", ".cache/sources/index.json", "Makefile"]
