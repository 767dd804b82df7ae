"""The Docker lab's source cache (model/docker_lab/sources.py, hack/source_cache.py, components/docker/sources.py).

Boundaries: the web servers `make cache` downloads from, played by a local HTTPS server with a certificate of its own
(Python's default TLS context, told of it through SSL_CERT_FILE, as a user's own CA would be) answering as a Helm
repository (index.yaml with each chart's digest) and a release site; a host that does not answer (a port nothing
listens on); the program under Pulumi mocks with a filled cache (what it hands the Kubernetes provider and
pulumi-command); scripts/pull-image.sh against a fake docker that answers `docker load` and `image inspect` as the
engine does. No test yet loads a cached archive into the real engine (the Docker lab's make up of 2026-12-04 did:
docs/docker-lab.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from https_site import Site, make_certificate
from lab_harness import lab_config, reference_program, run_program
from shared_data import ROOT

from hack import source_cache
from model.config import parse_config
from model.docker_lab.sources import Entry, SourceCache, chart_item, manifest_item, needed, tool_items
from model.versions import CHECKSUMS, Versions
from tests.hack.test_first_run import BASH, fake_bin

METALLB = Versions().metallb_manifest


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def site(certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    served = Site(certificate)
    monkeypatch.setenv("GPULAB_SOURCE_MIRROR", served.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    yield served
    served.server.shutdown()


@pytest.fixture
def filler(tmp_path: Path) -> source_cache.Filler:
    work = tmp_path / "work"
    work.mkdir()
    source_cache.needed_items[:] = needed(parse_config(lab_config()))
    return source_cache.Filler(SourceCache(tmp_path / "cache"), work)


def test_the_reference_stack_takes_every_part_from_outside() -> None:
    items = needed(parse_config(lab_config()))
    kinds = {
        kind: {i.key for i in items if i.kind == kind} for kind in ("chart", "manifest", "image", "tool", "plugin")
    }
    assert {key.split("|")[1] for key in kinds["chart"]} == {"cert-manager", "kamaji", "hami"}
    assert kinds["manifest"] == {METALLB, Versions().calico_manifest}
    assert "docker.io/projecthami/hami:v2.8.3" in kinds["image"]
    assert Versions().management_node_image.replace("kindest/", "docker.io/kindest/") in kinds["image"]
    assert kinds["plugin"] == {"kubernetes 4.34.2", "docker 5.2.0", "command 1.2.1"}
    assert len(kinds["tool"]) == 4  # kind, kubectl, the Pulumi CLI and its release's checksums
    # The pinned checksums with a public trace are carried by the items.
    assert manifest_item(METALLB).sha256 == CHECKSUMS[METALLB]
    assert chart_item(Versions().hami).sha256 == "57835bd9da24eec5916e528ded7fcfbc4c05fa60020efd16370c1c2f4050f4f6"


def test_a_process_mode_stack_takes_nothing_and_a_bridge_lab_no_calico() -> None:
    assert needed(parse_config(lab_config(runtime="process", management={"name": "gpulab"}))) == []
    node = "gpulab/kind-node:v1.36.4"
    bridge = lab_config(cni="bridge", versions={"managementNodeImage": node, "workerNodeImages": {"v1.36.4": node}})
    keys = {item.key for item in needed(parse_config(bridge))}
    assert not [key for key in keys if "calico" in key]
    assert "docker.io/gpulab/kind-node:v1.36.4" in keys


@pytest.mark.integration
def test_a_manifest_matching_its_published_checksum_is_added(site: Site, filler: source_cache.Filler) -> None:
    body = b"kind: Namespace\n"
    item = manifest_item(METALLB)
    item = type(item)(item.kind, item.key, item.file, item.url, sha(body))  # the checksum of what we serve
    site.serve(METALLB, body)
    filler.fetch(item)
    assert filler.cache.path(item).read_bytes() == body
    assert SourceCache.open(filler.cache.folder).entries[item.key].sha256 == sha(body)


@pytest.mark.integration
def test_a_manifest_with_another_checksum_is_refused_and_not_added(site: Site, filler: source_cache.Filler) -> None:
    item = manifest_item(METALLB)  # pinned to upstream's checksum
    site.serve(METALLB, b"kind: Namespace  # not what MetalLB published\n")
    with pytest.raises(source_cache.CacheError) as refused:
        filler.fetch(item)
    assert f"is not the {CHECKSUMS[METALLB]} upstream publishes" in str(refused.value)
    assert not filler.cache.path(item).exists() and item.key not in filler.cache.entries


def chart_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"name: cert-manager\nversion: v1.21.2\n"
        info = tarfile.TarInfo("cert-manager/Chart.yaml")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.integration
@pytest.mark.parametrize("digest_matches", [True, False])
def test_a_chart_is_checked_against_its_repositorys_index(
    site: Site, filler: source_cache.Filler, digest_matches: bool
) -> None:
    item = chart_item(Versions().cert_manager)
    archive = chart_archive()
    digest = sha(archive) if digest_matches else "0" * 64
    index = {
        "entries": {
            "cert-manager": [{"version": "v1.21.2", "urls": ["charts/cert-manager-v1.21.2.tgz"], "digest": digest}]
        }
    }
    site.serve("https://charts.jetstack.io/index.yaml", json.dumps(index).encode())
    site.serve("https://charts.jetstack.io/charts/cert-manager-v1.21.2.tgz", archive)
    if digest_matches:
        filler.fetch(item)
        assert filler.cache.path(item).read_bytes() == archive
    else:
        with pytest.raises(source_cache.CacheError, match="sha256 is not the digest its repository lists"):
            filler.fetch(item)


@pytest.mark.integration
def test_the_pulumi_cli_is_checked_against_its_releases_checksums(site: Site, filler: source_cache.Filler) -> None:
    cli, sums = [item for item in tool_items(Versions(), kind=False) if "pulumi" in item.url]
    site.serve(cli.url, b"the CLI archive")
    site.serve(sums.url, f"{'1' * 64}  {cli.url.rsplit('/', 1)[1]}\n".encode())
    with pytest.raises(source_cache.CacheError, match="its sha256 is not the one"):
        filler.fetch(cli)
    site.serve(sums.url, f"{sha(b'the CLI archive')}  {cli.url.rsplit('/', 1)[1]}\n".encode())
    filler.cache.entries.pop(sums.key)
    filler.fetch(cli)
    assert filler.cache.path(cli).read_bytes() == b"the CLI archive"


def test_a_host_that_does_not_answer_is_named(filler: source_cache.Filler, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setenv("GPULAB_SOURCE_MIRROR", f"https://127.0.0.1:{port}")
    monkeypatch.setenv("GPULAB_CONNECT_TIMEOUT", "2")
    with pytest.raises(source_cache.CacheError) as refused:
        filler.fetch(manifest_item(METALLB))
    assert "cannot be reached from this host" in str(refused.value)


def image_archive(path: Path, tag: str, content: bytes) -> str:
    """A `docker save` archive of one image; its image id."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("hello")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(layer.getvalue())]}}).encode()
    with tarfile.open(path, "w") as archive:
        for name, data in (
            ("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": [tag], "Layers": ["l/layer.tar"]}])),
            ("config.json", config),
            ("l/layer.tar", layer.getvalue()),
        ):
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            archive.addfile(info, io.BytesIO(raw))
    return "sha256:" + sha(config)


def filled(folder: Path, config: dict, *, leave_out: str = "", change: str = "") -> SourceCache:
    """A cache holding every item `config` needs (made-up contents), less `leave_out`, `change` edited after."""
    cache = SourceCache(folder)
    for item in needed(parse_config(config)):
        if item.key == leave_out:
            continue
        path = cache.path(item)
        path.parent.mkdir(parents=True, exist_ok=True)
        image_id = ""
        if item.kind == "image":
            image_id = image_archive(path, item.key.split("@")[0], item.key.encode())
        else:
            path.write_bytes(item.key.encode())
        # Made-up contents: an item upstream publishes a checksum for is recorded as added --relaxed.
        cache.entries[item.key] = Entry(item.file, sha256_file(path), "test", image_id, relaxed=bool(item.sha256))
        if item.key == change:
            path.write_bytes(b"edited")
    cache.save()
    return cache


def sha256_file(path: Path) -> str:
    return sha(path.read_bytes())


def test_the_program_reads_charts_manifests_and_images_from_a_full_cache(tmp_path: Path) -> None:
    config = lab_config(sourceCache=str(tmp_path / "cache"))
    cache = filled(tmp_path / "cache", config)
    program = run_program(config)
    hami = program.named("tenant-a-gpus-hami")
    assert hami.inputs["chart"] == str(cache.path(chart_item(Versions().hami)))
    assert "repositoryOpts" not in hami.inputs and "version" not in hami.inputs
    metallb = program.named("management-metallb")
    assert metallb.inputs["file"] == str(cache.path(manifest_item(METALLB)))
    pulls = [r for r in program.registrations.values() if r.name.startswith("images-pull-")]
    assert pulls and all(r.inputs["environment"]["ARCHIVE"].startswith(str(tmp_path)) for r in pulls)
    hami_image = next(r for r in pulls if r.inputs["environment"]["TAGGED"] == "docker.io/projecthami/hami:v2.8.3")
    assert hami_image.inputs["environment"]["IMAGE_ID"] == cache.entries["docker.io/projecthami/hami:v2.8.3"].image_id
    # The node images come from the cache too, by tag, once loaded.
    node = "docker.io/kindest/node:v1.36.4"
    kind = program.named("management-kind")
    assert kind.inputs["environment"]["NODE_IMAGE"] == node
    loaded = next(r for r in pulls if r.inputs["environment"]["TAGGED"] == node)
    assert loaded.urn in kind.dependencies
    assert program.named("tenant-a-worker-image").inputs["name"] == node
    # docker run by a digest finds nothing among loaded images (no RepoDigests) and goes to the registry.
    assert program.named("tenant-a-worker-host-prerequisites").inputs["environment"]["IMAGE"] == node


def test_without_a_cache_the_program_downloads_as_always() -> None:
    program = reference_program()
    hami = program.named("tenant-a-gpus-hami")
    assert hami.inputs["chart"] == "hami" and hami.inputs["repositoryOpts"]["repo"].startswith("https://")
    assert "ARCHIVE" not in program.named("images-pull-projecthami-hami-v2-8-3").inputs["environment"]


@pytest.mark.parametrize("problem", ["missing", "changed"])
def test_a_cache_that_cannot_serve_the_stack_names_each_item_and_nothing_is_created(
    tmp_path: Path, problem: str
) -> None:
    config = lab_config(sourceCache=str(tmp_path / "cache"))
    hami_chart = chart_item(Versions().hami).key
    calico = Versions().calico_manifest
    if problem == "missing":
        filled(tmp_path / "cache", config, leave_out=hami_chart)
        expected = f"  chart {hami_chart}: missing"
    else:
        filled(tmp_path / "cache", config, change=calico)
        expected = f"  manifest {calico}: changed since it was added"
    with pytest.raises(Exception) as refused:
        run_program(config)
    assert expected in str(refused.value) and "make cache STACK=" in str(refused.value)


@pytest.mark.integration
def test_pull_image_loads_the_caches_archive_and_never_pulls(tmp_path: Path) -> None:
    archive = tmp_path / "hami.tar"
    image_id = image_archive(archive, "docker.io/projecthami/hami:v2.8.3", b"hami")
    calls = tmp_path / "calls"
    # As the engine: no such image until `docker load`, then the archive's id.
    docker = f"""echo "docker $*" >> {calls}
case "$1 $2" in
  "image inspect") [ -f {tmp_path}/loaded ] && echo "${{FAKE_ID}}" || exit 1 ;;
  "load -q") touch {tmp_path}/loaded ;;
  *) exit 3 ;;
esac"""
    fakes = fake_bin(tmp_path / "fakes", docker=docker)
    env = {
        **os.environ,
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "IMAGE": "docker.io/projecthami/hami:v2.8.3",
        "TAGGED": "docker.io/projecthami/hami:v2.8.3",
        "PLATFORM": "linux/amd64",
        "ARCHIVE": str(archive),
        "IMAGE_ID": image_id,
    }
    script = [BASH, str(ROOT / "scripts" / "pull-image.sh")]
    loaded = subprocess.run(script, capture_output=True, text=True, timeout=30, env={**env, "FAKE_ID": image_id})
    assert loaded.returncode == 0, loaded.stderr
    assert not [line for line in calls.read_text().splitlines() if line.startswith("docker pull")]
    assert f"docker load -q -i {archive}" in calls.read_text()
    (tmp_path / "loaded").unlink()
    other = subprocess.run(
        script, capture_output=True, text=True, timeout=30, env={**env, "FAKE_ID": "sha256:" + "9" * 64}
    )
    assert other.returncode == 1
    assert f"not the image {image_id} the source cache's index records" in other.stderr


@pytest.mark.parametrize("host_tools", [False, True])
def test_list_names_as_missing_exactly_what_check_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host_tools: bool
) -> None:
    """A cache without the host tools: with GPULAB_HOST_TOOLS (the user's own kind, kubectl, Pulumi CLI) `check`
    passes, so `list` must not call them missing; without it both name them (issue 65: list showed four tools
    [missing] that check dropped). In-process: the script's main, on a stack file of its own."""
    config = lab_config(sourceCache=str(tmp_path / "cache"))
    tool_items = [item for item in needed(parse_config(config)) if item.kind == "tool"]
    tools = {item.key for item in tool_items}
    assert tools
    cache = filled(tmp_path / "cache", config)
    for item in tool_items:  # the cache of a host that brings its own tools
        del cache.entries[item.key]
        cache.path(item).unlink()
    cache.save()
    monkeypatch.setattr(source_cache, "ROOT", tmp_path)
    (tmp_path / "Pulumi.cached.yaml").write_text(
        json.dumps({"config": {f"gpulab:{key}": value for key, value in config.items()}})
    )
    if host_tools:
        monkeypatch.setenv("GPULAB_HOST_TOOLS", str(tmp_path / "own-tools"))
    else:
        monkeypatch.delenv("GPULAB_HOST_TOOLS", raising=False)
    assert source_cache.main(["list", "--stack", "cached"]) == 0
    listed = capsys.readouterr().out.splitlines()
    missing = {line.split()[1] for line in listed if line.endswith("[missing]")}
    checked = source_cache.main(["check", "--stack", "cached"])
    refused = capsys.readouterr().err
    if host_tools:
        assert missing == set() and checked == 0, refused
        assert all("[not needed: GPULAB_HOST_TOOLS" in line for line in listed if line.split()[1] in tools)
    else:
        assert missing == tools and checked == 1
        assert all(key in refused for key in tools)


def test_an_image_built_on_a_host_is_never_pulled_into_the_cache(filler, monkeypatch: pytest.MonkeyPatch) -> None:
    """gpulab's plugin image (devicePlugin: gpulab) is `make lab-images`' build: no registry serves localhost/."""
    from model.docker_lab.sources import image_item
    from model.versions import HAMI_DEVICE_PLUGIN_IMAGE

    calls: list[tuple] = []
    monkeypatch.setattr(source_cache, "docker", lambda *args, **kw: calls.append(args))
    said = r"is built, not pulled: build it \(gpulab.s: make lab-images\), then "
    said += r"`venv/bin/python -m hack.source_cache add localhost/"
    with pytest.raises(source_cache.CacheError, match=said):
        filler.pull_image(image_item(HAMI_DEVICE_PLUGIN_IMAGE))
    assert calls == []
