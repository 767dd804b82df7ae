"""What a reader of a clone can follow. The team's field notes (`notes/<x>.md`, in
`../shared/notes` on gpulab's dev and CI machines only) are in no user's clone: code, comments and docs cite
the upstream source itself (repository, tag, file) or state the fact with its project and version. Looking
up upstream files in `../shared/upstream` at run time (tests/support/upstream_data.py, `make upstream-data`) is a
mechanism with a fallback, not a citation, and stays allowed."""

from __future__ import annotations

import re
import subprocess

import pytest
from shared_data import ROOT

# A field note cited by path or by name: notes/hami.md, ../shared/notes/kamaji.md, /work/shared/notes,
# "(field notes: process-lab.md)".
NOTE_CITATION = re.compile(r"shared/notes|(?<![\w./-])notes/[\w.-]+\.md|\bfield notes?\b", re.IGNORECASE)
# Any other path into the team's shared folder; only ../shared/upstream has a use (the lookup above).
SHARED_PATH = re.compile(r"\.\./shared/(?!upstream\b)|/work/shared\b")
# Wording that assumes the reader sits at gpulab's own dev machine, in what users read.
ONE_MACHINE = re.compile(r"this 2-core|\bproxy here\b|not in this branch", re.IGNORECASE)
USER_DOCS = ("README.md", "docs/", "tools/README.md")


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode:
        pytest.skip("not a git checkout: the tracked files cannot be told from the user's own")
    return [name for name in listed.stdout.decode().split("\0") if name]


def offenders(pattern: re.Pattern[str], names: list[str]) -> list[str]:
    """`file:line: text` of every line matching `pattern` (binary files and files deleted in the work tree skipped)."""
    found = []
    for name in names:
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if pattern.search(line):
                found.append(f"{name}:{number}: {line.strip()[:160]}")
    return found


@pytest.mark.parametrize(
    ("text", "cites"),
    [
        ("(notes/hami.md section 2)", True),
        ("see ../shared/notes/kamaji.md section 0 item 4", True),
        ("(field notes: process-lab.md)", True),
        ("/work/shared/notes/pulumi.md", True),
        ("HAMi v2.8.3 pkg/device/quota.go", False),
        ("kind v0.33.0 release notes list this digest", False),
        ("`notes` holds the checker's other lines", False),
        ("docs/release-notes/v1.md", False),
    ],
)
def test_the_citation_pattern_knows_a_note_from_other_notes(text: str, cites: bool) -> None:
    assert bool(NOTE_CITATION.search(text)) is cites


@pytest.mark.integration
def test_no_tracked_file_outside_tests_cites_the_team_s_field_notes() -> None:
    names = [name for name in tracked_files() if not name.startswith("tests/")]
    cited = offenders(NOTE_CITATION, names)
    assert not cited, (
        "these lines cite the team's field notes, which no user's clone has (../shared exists only on gpulab's "
        "dev and CI machines); cite the upstream source the note draws on instead (repository, tag, file, or a "
        "URL), or state the fact with its project and version:\n" + "\n".join(cited)
    )


@pytest.mark.integration
def test_no_tracked_file_outside_tests_points_into_the_shared_folder_but_its_upstream_copy() -> None:
    names = [name for name in tracked_files() if not name.startswith("tests/")]
    pointing = offenders(SHARED_PATH, names)
    assert not pointing, (
        "these lines name a path under ../shared (or /work/shared) other than ../shared/upstream, the run-time "
        "lookup of upstream files; a user's clone has no such folder:\n" + "\n".join(pointing)
    )


@pytest.mark.integration
def test_what_users_read_does_not_assume_gpulab_s_own_machine() -> None:
    names = [name for name in tracked_files() if name.startswith(USER_DOCS) and name.endswith(".md")]
    assert "README.md" in names and "docs/tools.md" in names, "the docs list lost track"
    assumed = offenders(ONE_MACHINE, names)
    assert not assumed, (
        "these lines speak of gpulab's dev machine as if the reader sat at it; name it (e.g. 'the 2-core "
        "Debian 12 dev VM, 2026-12-01') or say what holds anywhere:\n" + "\n".join(assumed)
    )


def test_the_cold_make_tools_time_readme_gives_is_the_one_docs_tools_md_measured() -> None:
    """README's figure is the quiet cold run of docs/tools.md's table, in minutes: one measurement, two places."""
    readme = (ROOT / "README.md").read_text()
    tools = (ROOT / "docs" / "tools.md").read_text()
    quiet = re.findall(r"^\| (\d{4}-\d{2}-\d{2}) \| quiet[^|]*\| (\d+) s ", tools, re.MULTILINE)
    assert quiet, "docs/tools.md's table has no quiet cold run (a row: | date | quiet... | N s ...)"
    minutes = round(int(quiet[0][1]) / 60)
    assert f"about {minutes} minutes on a quiet 2-core machine" in readme, f"README must say {minutes} minutes"
