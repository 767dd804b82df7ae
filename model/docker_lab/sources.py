"""The Docker lab's sources: every chart, manifest, image, host tool and Pulumi plugin a stack takes from outside,
and the source cache that holds them for a host that must not (or cannot) download.

Without `gpulab:sourceCache` the lab fetches as always: Helm charts from their repositories, manifests from their
URLs, images pulled once on the host, tools and plugins downloaded. With it, `make up` reads each of them from the
cache folder instead and downloads nothing: `make cache` fills the folder where the network can be reached (or on
another machine, whose folder is then copied), and a missing or changed item stops `make up` before anything is
created, naming each one.

The cache is a folder with `index.json` and one file per item:
    charts/<chart>-<version>.tgz     manifests/<host and path of the URL, flattened>
    images/<reference, flattened>.tar (`docker save`, one platform)
    tools/<the release file's own name>   plugins/pulumi-resource-<name>-v<version>-linux-<arch>.tar.gz
The index records, per item, its file, the file's sha256 and where it came from; an image also its image id (the
sha256 of its config, which pins every layer: `docker load` checks each layer against the config's diff_ids). An
item whose upstream publishes a checksum (model/versions.py CHECKSUMS) is held to it when it is added; an item
added with `--relaxed` (the user's own build of a pinned item, say) is marked so, and `make up` names it.
Plain Python: no Pulumi import.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from model.config import LabConfig
from model.docker_lab.images import inventory, node_images
from model.image_ref import ImageRef
from model.versions import CHECKSUMS, HelmChart, Versions

PROJECT = Path(__file__).resolve().parents[2]  # model/docker_lab/ is two folders down
INDEX = "index.json"
Kind = Literal["chart", "manifest", "image", "tool", "plugin"]
# The Docker lab's providers: each is the release its installed SDK asks for (the wheel's pulumi-plugin.json, which
# the engine reads too); requirements.txt pins the SDKs.
SDKS = ("pulumi_kubernetes", "pulumi_docker", "pulumi_command")


def sdk_plugins() -> dict[str, str]:
    """{plugin name: version} as the installed SDKs ask the engine for them."""
    import importlib.resources

    found = {}
    for sdk in SDKS:
        plugin = json.loads(importlib.resources.files(sdk).joinpath("pulumi-plugin.json").read_text())
        found[plugin["name"]] = plugin["version"]
    return found


@dataclass(frozen=True, order=True)
class Item:
    kind: Kind
    key: str  # what the lab asks for: a chart's `repo|chart|version`, a manifest's URL, an image reference, ...
    file: str  # where it lives in the cache
    url: str = ""  # where `make cache` gets it ("" for an image: the host's engine pulls it)
    sha256: str = ""  # the checksum upstream publishes for it, where one is known (model/versions.py CHECKSUMS)


@dataclass
class Entry:
    """An item in a cache's index."""

    file: str
    sha256: str
    source: str
    image_id: str = ""
    relaxed: bool = False


@dataclass
class Problem:
    item: Item
    what: str


def _flat(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def chart_key(chart: HelmChart) -> str:
    return f"{chart.repo.rstrip('/')}|{chart.chart}|{chart.version}"


def chart_item(chart: HelmChart) -> Item:
    return Item(
        "chart",
        chart_key(chart),
        f"charts/{chart.chart}-{chart.version}.tgz",
        sha256=CHECKSUMS.get(chart_key(chart), ""),
    )


def manifest_item(url: str) -> Item:
    return Item("manifest", url, f"manifests/{_flat(url.removeprefix('https://'))}", url, CHECKSUMS.get(url, ""))


def image_item(reference: str) -> Item:
    ref = ImageRef.parse(reference)
    return Item("image", ref.full, f"images/{_flat(ref.tagged)}.tar")


def tool_items(versions: Versions, kind: bool, arch: str = "amd64") -> list[Item]:
    """The host tools `make up` installs into ./bin (hack/prereqs.sh names the same URLs)."""
    pulumi_arch = "x64" if arch == "amd64" else arch
    pulumi = versions.pulumi.version
    urls = [
        (
            f"https://dl.k8s.io/release/{versions.kubectl.version}/bin/linux/{arch}/kubectl",
            versions.kubectl.sha256_linux_amd64 if arch == "amd64" else "",
        ),
        (f"https://get.pulumi.com/releases/sdk/pulumi-v{pulumi}-linux-{pulumi_arch}.tar.gz", ""),
        (f"https://github.com/pulumi/pulumi/releases/download/v{pulumi}/pulumi-{pulumi}-checksums.txt", ""),
    ]
    if kind:
        kind_url = (
            f"https://github.com/kubernetes-sigs/kind/releases/download/{versions.kind.version}/kind-linux-{arch}"
        )
        urls.insert(0, (kind_url, versions.kind.sha256_linux_amd64 if arch == "amd64" else ""))
    items = []
    for url, sha in urls:
        name = url.rsplit("/", 1)[1]
        # kind's and kubectl's file names carry no version: the cache's names do.
        if name == "kubectl":
            name = f"kubectl-{versions.kubectl.version}-linux-{arch}"
        elif name.startswith("kind-"):
            name = f"kind-{versions.kind.version}-linux-{arch}"
        items.append(Item("tool", url, f"tools/{name}", url, sha))
    return items


def plugin_item(name: str, version: str, arch: str = "amd64") -> Item:
    archive = f"pulumi-resource-{name}-v{version}-linux-{arch}.tar.gz"
    url = f"https://github.com/pulumi/pulumi-{name}/releases/download/v{version}/{archive}"
    return Item("plugin", f"{name} {version}", f"plugins/{archive}", url)


def needed(lab: LabConfig) -> list[Item]:
    """Every item the Docker lab of `lab` takes from outside. A wing that downloads nothing (process mode: its
    programs are make tools') takes nothing; an existing management cluster's own installs are the user's."""
    if not lab.wing.downloads:
        return []
    versions, management = lab.versions, lab.management
    items: list[Item] = []
    if management.installs("cert_manager"):
        items.append(chart_item(versions.cert_manager))
    if management.installs("kamaji"):
        items.append(chart_item(versions.kamaji))
    if management.installs("metallb"):
        items.append(manifest_item(versions.metallb_manifest))
    items += [chart_item(lab.hami_chart(tenant)) for tenant in lab.tenants if lab.runs_hami(tenant)]
    if lab.pod_network == "calico":
        items.append(manifest_item(versions.calico_manifest))
    images = {use.ref.full for use in inventory(lab) if use.needs_pull} | node_images(lab)
    items += [image_item(image) for image in sorted(images)]
    items += tool_items(versions, kind=management.mode == "kind")
    items += [plugin_item(name, version) for name, version in sdk_plugins().items()]
    return sorted(set(items))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive_image_id(path: Path) -> str:
    """The image id of a `docker save` archive's one image: its config file's sha256."""
    import tarfile

    with tarfile.open(path) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = archive.extractfile(manifest[0]["Config"])
        assert config is not None
        return "sha256:" + hashlib.sha256(config.read()).hexdigest()


@dataclass
class SourceCache:
    """A source cache folder and its index."""

    folder: Path
    entries: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def open(cls, folder: Path) -> SourceCache:
        index = folder / INDEX
        entries: dict[str, Entry] = {}
        if index.exists():
            data = json.loads(index.read_text())
            entries = {key: Entry(**value) for key, value in data.get("items", {}).items()}
        return cls(folder, entries)

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = {"version": 1, "items": {key: asdict(entry) for key, entry in sorted(self.entries.items())}}
        partial = self.folder / f".{INDEX}.partial"
        partial.write_text(json.dumps(data, indent=1) + "\n")
        partial.replace(self.folder / INDEX)

    def path(self, item: Item) -> Path:
        return self.folder / item.file

    def problems(self, items: list[Item], hash_archives: bool = False) -> list[Problem]:
        """What keeps the cache from serving `items`: missing, or not what the index says. Charts, manifests, tools
        and plugins are hashed (small); an image archive is checked by its image id when `hash_archives`, else
        only found (`make up` loads it and checks the id then: scripts/pull-image.sh)."""
        found: list[Problem] = []
        for item in items:
            entry = self.entries.get(item.key)
            path = self.path(item)
            if entry is None or not path.is_file():
                found.append(Problem(item, "missing"))
            elif item.sha256 and entry.sha256 != item.sha256 and not entry.relaxed:
                found.append(Problem(item, f"recorded as sha256 {entry.sha256}, not the pinned {item.sha256}"))
            elif item.kind != "image" and sha256_of(path) != entry.sha256:
                found.append(Problem(item, f"changed since it was added (sha256 is no longer {entry.sha256})"))
            elif item.kind == "image" and hash_archives and archive_image_id(path) != entry.image_id:
                found.append(Problem(item, f"holds another image than the recorded {entry.image_id}"))
        return found

    def relaxed(self, items: list[Item]) -> list[Item]:
        return [item for item in items if (entry := self.entries.get(item.key)) is not None and entry.relaxed]


def cache_folder(lab: LabConfig, project: Path) -> Path | None:
    """The stack's source cache folder (relative paths are the project's), or None."""
    if not lab.source_cache:
        return None
    folder = Path(lab.source_cache).expanduser()
    return folder if folder.is_absolute() else project / folder


def explain(problems: list[Problem], folder: Path, stack: str) -> str:
    lines = [f"  {problem.item.kind} {problem.item.key}: {problem.what}" for problem in problems]
    return (
        f"the source cache {folder} (gpulab:sourceCache) cannot serve this stack; nothing was created:\n"
        + "\n".join(lines)
        + f"\nfill it where the network can be reached: make cache STACK={stack} (docs/offline.md)"
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m model.docker_lab.sources --stack S`: the stack's source cache folder on stdout and exit 0, or exit
    1 when it names none (make asks this before it reads the cache), 2 for a stack that does not validate."""
    import argparse
    import sys

    from model.config import ConfigError, load_stack_file

    parser = argparse.ArgumentParser(prog="python -m model.docker_lab.sources")
    parser.add_argument("--stack", default="dev")
    args = parser.parse_args(argv)
    try:
        lab = load_stack_file(PROJECT / f"Pulumi.{args.stack}.yaml")
    except (OSError, ConfigError) as error:
        print(f"error: Pulumi.{args.stack}.yaml: {error}", file=sys.stderr)
        return 2
    folder = cache_folder(lab, PROJECT)
    if folder is None:
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
