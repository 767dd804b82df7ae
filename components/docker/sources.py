"""Where the Docker lab's charts and manifests come from: their repositories and URLs, or the stack's source cache
(model/docker_lab/sources.py), checked before anything is declared."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from model.config import LabConfig
from model.docker_lab.sources import SourceCache, cache_folder, chart_item, explain, manifest_item, needed
from model.versions import HelmChart

PROJECT = Path(__file__).resolve().parents[2]  # the project: a relative gpulab:sourceCache is under it


def check_sources(lab: LabConfig) -> None:
    """A stack with a source cache goes on only when the cache holds everything the stack needs; otherwise a
    RunError names each missing or changed item, and the program declares nothing."""
    if (cache := sources(lab)) is None:
        return  # the lab downloads: nothing to check, nothing read
    read = [item for item in needed(lab) if item.kind in ("chart", "manifest", "image")]  # tools and plugins: make's
    if problems := cache.problems(read):
        raise pulumi.RunError(explain(problems, cache.folder, pulumi.get_stack()))


def sources(lab: LabConfig) -> SourceCache | None:
    """The stack's source cache (its index read, nothing hashed), or None: the lab downloads."""
    folder = cache_folder(lab, PROJECT)
    return SourceCache.open(folder) if folder is not None else None


def release_chart(chart: HelmChart, cache: SourceCache | None) -> dict:
    """A helm.v3.Release's chart arguments: the repository's chart at its version, or the cached archive (a local
    chart: Helm takes its version from the archive)."""
    if cache is None:
        return {
            "chart": chart.chart,
            "version": chart.version,
            "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
        }
    return {"chart": str(cache.path(chart_item(chart)))}


def manifest_file(url: str, cache: SourceCache | None) -> str:
    """A manifest's location for a ConfigFile: its URL, or the cached copy."""
    return url if cache is None else str(cache.path(manifest_item(url)))
