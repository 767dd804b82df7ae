"""Every image a user is told to run in README or docs/ is one the lab holds: pinned by tag (a bare name means
`:latest`, which an offline lab holds nowhere: issue 65 found docs/usage.md's "Try a GPU pod" running `busybox`),
and where it is the lab's workload image, the pin model/versions.py gives. Files are read directly (no git)."""

from __future__ import annotations

import re

from shared_data import ROOT

from model.image_ref import ImageRef
from model.versions import Versions

# `image: NAME` in a manifest and `--image=NAME` / `--image NAME` on a kubectl line.
IMAGE = re.compile(r"(?:^\s*-?\s*image:\s*|--image[= ])([^\s#'\"]+)", re.MULTILINE)


def told_images() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in IMAGE.finditer(path.read_text()):
            found.append((path.name, match.group(1)))
    return found


def test_the_pattern_finds_manifest_and_kubectl_images() -> None:
    text = "    - name: c\n      image: busybox\nkubectl run x --image=nginx:1.27 --restart=Never\n"
    assert [m.group(1) for m in IMAGE.finditer(text)] == ["busybox", "nginx:1.27"]


def test_every_image_the_docs_tell_users_to_run_is_pinned_and_the_labs_own() -> None:
    images = told_images()
    assert images, "docs/usage.md's GPU pod names an image"
    workload = ImageRef.parse(Versions().workload_image)
    for name, image in images:
        ref = ImageRef.parse(image)  # refuses a reference with neither tag nor digest
        assert ref.tag not in (None, "latest"), f"{name}: {image} is not pinned: an offline lab holds no :latest"
        if ref.name == workload.name:
            assert ref.tag == workload.tag, f"{name}: {image}, but the lab's workload image is {workload.full}"
