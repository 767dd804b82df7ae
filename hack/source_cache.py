"""`make cache`: the Docker lab's source cache (model/docker_lab/sources.py says what it holds and why).

    python -m hack.source_cache list    --stack S   every item the stack takes from outside, and the cache's state
    python -m hack.source_cache fill    --stack S   fetch what is missing, online, each checked (make cache)
    python -m hack.source_cache add     --stack S KEY [FILE] [--relaxed]
                                                       put one item in by hand: a file, or an image from the engine
    python -m hack.source_cache check   --stack S   exit 1, naming each item, unless the cache serves the stack
    python -m hack.source_cache path    --stack S URL   the cached file of a tool's URL (hack/prereqs.sh)
    python -m hack.source_cache plugins --stack S   install the cached Pulumi plugins into the CLI's plugin folder

The cache folder is the stack's `gpulab:sourceCache`, or `--dir`. Downloads go to `GPULAB_SOURCE_MIRROR/<host>/<path>`
when that is set (a mirror of the upstream sites), give up on a host that does not answer within
GPULAB_CONNECT_TIMEOUT seconds (10), and are checked against the checksum upstream publishes where one is known.
Exit codes: 0 done, 1 an item failed or the cache is incomplete (each named), 2 bad usage or stack.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from boundary import downloads
from boundary.bounded_run import Unfinished, run_text
from boundary.safe_yaml import load as load_yaml
from model.config import ConfigError, LabConfig
from model.config.loading import load_stack_file
from model.docker_lab.sources import (
    Entry,
    Item,
    SourceCache,
    archive_image_id,
    cache_folder,
    explain,
    needed,
    sha256_of,
)
from model.image_ref import ImageRef
from model.node_container import node_platform

ROOT = Path(__file__).resolve().parent.parent


class CacheError(Exception):
    """One item could not be fetched or added: the message says which and why."""


def say(message: str) -> None:
    print(f"[gpulab] {message}", file=sys.stderr, flush=True)


def download(url: str, dest: Path) -> None:
    """url (or its mirror) into dest (boundary/downloads.py: a silent host is given up after GPULAB_CONNECT_TIMEOUT)."""
    try:
        downloads.download(url, dest)
    except downloads.Refused as error:
        raise CacheError(str(error)) from None
    except downloads.Unreachable as error:
        raise CacheError(f"{error}; fill the cache where it can be") from None
    except ValueError as error:  # a timeout setting that is not a number
        raise CacheError(str(error)) from None


def docker(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    try:
        return run_text(["docker", *args], timeout)
    except Unfinished:
        raise CacheError(f"docker {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None


class Filler:
    def __init__(self, cache: SourceCache, work: Path) -> None:
        self.cache, self.work = cache, work

    def place(self, item: Item, source: Path, origin: str, relaxed: bool = False, image_id: str = "") -> None:
        """Move a fetched file into the cache, checked against upstream's checksum, and record it."""
        sha = sha256_of(source)
        if item.sha256 and sha != item.sha256 and not relaxed:
            raise CacheError(
                f"{item.kind} {item.key}: sha256 {sha} is not the {item.sha256} upstream publishes; not added "
                "(a build of your own: add it with --relaxed)"
            )
        target = self.cache.path(item)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(source), target)
        self.cache.entries[item.key] = Entry(item.file, sha, origin, image_id, relaxed)
        self.cache.save()

    def fetch(self, item: Item) -> None:
        if item.kind == "image":
            self.pull_image(item)
        elif item.kind == "chart":
            self.fetch_chart(item)
        else:
            partial = self.work / Path(item.file).name
            download(item.url, partial)
            self.check_release_checksum(item, partial)
            self.place(item, partial, item.url)

    def check_release_checksum(self, item: Item, partial: Path) -> None:
        """The Pulumi CLI archive against the checksums file of its release (in the cache first)."""
        if item.kind != "tool" or "/releases/sdk/pulumi-" not in item.url:
            return
        sums = next(i for i in needed_items if i.url.endswith("-checksums.txt"))
        if sums.key not in self.cache.entries:
            self.fetch(sums)
        lines = self.cache.path(sums).read_text().splitlines()
        wanted = {line.split()[1]: line.split()[0] for line in lines if len(line.split()) == 2}
        name = item.url.rsplit("/", 1)[1]
        if wanted.get(name) != sha256_of(partial):
            raise CacheError(f"{item.url}: its sha256 is not the one {sums.url} lists for {name}")

    def fetch_chart(self, item: Item) -> None:
        repo, chart, version = item.key.split("|")
        index = self.work / "index.yaml"
        download(f"{repo}/index.yaml", index)
        entries = (load_yaml(index.read_text(), f"{repo}/index.yaml") or {}).get("entries", {}).get(chart, [])
        entry = next((e for e in entries if str(e.get("version")) == version), None)
        if entry is None or not entry.get("urls"):
            raise CacheError(f"chart {chart} {version} is not in {repo}/index.yaml")
        url = urllib.parse.urljoin(f"{repo}/", entry["urls"][0])
        partial = self.work / Path(item.file).name
        download(url, partial)
        digest = entry.get("digest")
        if digest and sha256_of(partial) != digest:
            raise CacheError(f"chart {chart} {version} from {url}: sha256 is not the digest its repository lists")
        self.place(item, partial, url)

    def pull_image(self, item: Item) -> None:
        ref = ImageRef.parse(item.key)
        if ref.registry == "localhost":  # built on a host, served by no registry (gpulab's: `make lab-images`)
            raise CacheError(
                f"{ref.full} is built, not pulled: build it (gpulab's: make lab-images), then "
                f"`venv/bin/python -m hack.source_cache add {ref.full} --relaxed`"
            )
        platform = node_platform()
        pulled = docker("pull", "--quiet", "--platform", platform, ref.full)
        if pulled.returncode != 0:
            raise CacheError(f"docker pull {ref.full}: {(pulled.stderr.strip().splitlines() or ['failed'])[-1]}")
        if ref.full != ref.tagged:
            docker("tag", ref.full, ref.tagged)
        self.save_image(item, ref, origin=f"docker pull {ref.full}")

    def save_image(self, item: Item, ref: ImageRef, origin: str, relaxed: bool = False) -> None:
        inspected = docker("image", "inspect", ref.tagged, timeout=60)
        if inspected.returncode != 0:
            raise CacheError(f"image {ref.tagged} is not in this host's Docker engine")
        facts = json.loads(inspected.stdout)[0]
        if ref.digest and not relaxed and not any(d.endswith(ref.digest) for d in facts.get("RepoDigests") or []):
            raise CacheError(
                f"image {ref.tagged} in the engine was not pulled as {ref.digest} (its RepoDigests: "
                f"{facts.get('RepoDigests') or 'none'}); pull it by digest, or add it with --relaxed"
            )
        partial = self.work / Path(item.file).name
        args = ["image", "save", "-o", str(partial), ref.tagged]
        if "--platform" in docker("image", "save", "--help", timeout=60).stdout:
            args[2:2] = ["--platform", node_platform()]
        saved = docker(*args)
        if saved.returncode != 0:
            raise CacheError(f"docker image save {ref.tagged}: {saved.stderr.strip()}")
        if archive_image_id(partial) != facts["Id"]:
            raise CacheError(f"the archive of {ref.tagged} does not hold image {facts['Id']}")
        self.place(item, partial, origin, relaxed=relaxed, image_id=facts["Id"])


needed_items: list[Item] = []


def stack_lab(stack: str) -> LabConfig:
    path = ROOT / f"Pulumi.{stack}.yaml"
    try:
        return load_stack_file(path)
    except (OSError, ConfigError) as error:
        raise SystemExit(f"[gpulab] {path.name}: {error}") from None


def open_cache(args: argparse.Namespace, lab: LabConfig) -> SourceCache | None:
    folder = Path(args.dir).resolve() if args.dir else cache_folder(lab, ROOT)
    return SourceCache.open(folder) if folder else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.source_cache", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["list", "fill", "add", "check", "path", "plugins"])
    parser.add_argument("rest", nargs="*", help="add: KEY [FILE]; path: URL")
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--dir", help="the cache folder (default: the stack's gpulab:sourceCache)")
    parser.add_argument("--relaxed", action="store_true", help="add: accept an item that is not upstream's own")
    args = parser.parse_intermixed_args(argv)  # options anywhere: `add --relaxed KEY FILE` as `add KEY FILE --relaxed`
    lab = stack_lab(args.stack)
    needed_items[:] = needed(lab)
    cache = open_cache(args, lab)
    if cache is None:
        if args.action in ("path", "plugins"):
            return 0  # no cache: prereqs downloads, the engine fetches plugins, as always
        say(f"stack {args.stack} names no source cache: set gpulab:sourceCache in Pulumi.{args.stack}.yaml, or --dir")
        return 2
    try:
        return ACTIONS[args.action](args, cache)
    except CacheError as error:
        say(str(error))
        return 1


def host_tools() -> bool:
    """The user's own kind, kubectl and Pulumi CLI (GPULAB_HOST_TOOLS, hack/prereqs.sh): the cache need not
    hold them."""
    return bool(os.environ.get("GPULAB_HOST_TOOLS"))


def wanted(items: list[Item]) -> list[Item]:
    """What the cache must hold for this host: every item, less the tools when the host brings its own. `list`,
    `check` and `fill` all ask this, so that `list` names as missing exactly what `check` refuses."""
    return [item for item in items if item.kind != "tool"] if host_tools() else list(items)


def do_list(args: argparse.Namespace, cache: SourceCache) -> int:
    items = wanted(needed_items)
    problems = {p.item.key: p.what for p in cache.problems(items)}
    for item in needed_items:
        entry = cache.entries.get(item.key)
        if item not in items:
            state = "not needed: GPULAB_HOST_TOOLS names the host's own"
        else:
            state = problems.get(item.key) or ("relaxed (not upstream's own)" if entry and entry.relaxed else "ok")
        print(f"{item.kind:8} {item.key}  [{state}]")
    return 0


def do_fill(args: argparse.Namespace, cache: SourceCache) -> int:
    failed = 0
    with tempfile.TemporaryDirectory(prefix="gpulab-cache.") as work:
        filler = Filler(cache, Path(work))
        for problem in cache.problems(wanted(needed_items), hash_archives=True):
            say(f"{problem.item.kind} {problem.item.key}: {problem.what}; fetching")
            try:
                filler.fetch(problem.item)
            except CacheError as error:
                say(str(error))
                failed += 1
    items = wanted(needed_items)
    left = cache.problems(items)
    say(f"source cache {cache.folder}: {len(items) - len(left)} of {len(items)} items")
    return 1 if failed or left else 0


def do_add(args: argparse.Namespace, cache: SourceCache) -> int:
    if not args.rest:
        raise SystemExit("[gpulab] add needs the item's key (as `list` prints it) and, but for an image, its file")
    key = args.rest[0]
    item = next((i for i in needed_items if i.key == key), None)
    if item is None and key.count("|") == 0:
        # An image may be named as the stack writes it (without docker.io/, library/).
        try:
            full = ImageRef.parse(key).full
        except ValueError:
            full = ""
        item = next((i for i in needed_items if i.kind == "image" and i.key == full), None)
    if item is None:
        raise CacheError(f"{key} is nothing stack {args.stack} takes from outside; `list` shows what it does")
    with tempfile.TemporaryDirectory(prefix="gpulab-cache.") as work:
        filler = Filler(cache, Path(work))
        if item.kind == "image":
            ref = ImageRef.parse(item.key)
            filler.save_image(item, ref, origin="docker image save (added by hand)", relaxed=args.relaxed)
        else:
            if len(args.rest) != 2:
                raise CacheError(f"add {item.key} needs its file")
            copy = Path(work) / Path(item.file).name
            shutil.copyfile(args.rest[1], copy)
            filler.place(item, copy, f"{args.rest[1]} (added by hand)", relaxed=args.relaxed)
    entry = cache.entries[item.key]
    say(f"added {item.kind} {item.key}{' (relaxed: not upstream' + chr(39) + 's own)' if entry.relaxed else ''}")
    return 0


def do_check(args: argparse.Namespace, cache: SourceCache) -> int:
    items = wanted(needed_items)
    problems = cache.problems(items)
    if problems:
        print(explain(problems, cache.folder, args.stack), file=sys.stderr)
        return 1
    relaxed = cache.relaxed(items)
    if relaxed:
        say(
            f"source cache: {len(relaxed)} item(s) are not upstream's own (added --relaxed): "
            + ", ".join(item.key for item in relaxed)
        )
    return 0


def do_path(args: argparse.Namespace, cache: SourceCache) -> int:
    url = args.rest[0] if args.rest else ""
    item = next((i for i in needed_items if i.kind == "tool" and i.url == url), None)
    if item is None or item.key not in cache.entries:
        return 0
    problems = cache.problems([item])
    if problems:
        raise CacheError(f"tool {url}: {problems[0].what} in the source cache {cache.folder}")
    print(cache.path(item))
    return 0


def do_plugins(args: argparse.Namespace, cache: SourceCache) -> int:
    plugins = [item for item in needed_items if item.kind == "plugin"]
    problems = cache.problems(plugins)
    if problems:
        print(explain(problems, cache.folder, args.stack), file=sys.stderr)
        return 1
    listed = run_text(["pulumi", "plugin", "ls", "--json"], 120)
    have = (
        {(p.get("name"), p.get("version")) for p in json.loads(listed.stdout or "[]")}
        if listed.returncode == 0
        else set()
    )
    for item in plugins:
        name, version = item.key.split()
        if (name, version) in have:
            continue
        say(f"installing Pulumi plugin {name} {version} from the source cache")
        install = ["pulumi", "plugin", "install", "resource", name, version, "--file", str(cache.path(item))]
        installed = run_text(install, 600)
        if installed.returncode != 0:
            raise CacheError(f"pulumi plugin install resource {name} {version}: {installed.stderr.strip()}")
    return 0


ACTIONS = {"list": do_list, "fill": do_fill, "add": do_add, "check": do_check, "path": do_path, "plugins": do_plugins}

if __name__ == "__main__":
    sys.exit(main())
