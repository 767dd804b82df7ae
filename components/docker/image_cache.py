"""ImageCache: every image the lab runs is pulled once into the host's Docker and loaded into the nodes.

Docker Hub allows 10 anonymous pulls per hour per IP, and containerd inside kind nodes pulls
anonymously even when the host ran `docker login` (docs.docker.com/docker-hub/usage;
kubernetes-sigs/kind#3977). So the host pulls (with the user's credentials and proxy, into a cache that
survives `make down`), and each node container gets the images it runs from there before any release or
manifest that runs them. Nodes then make no registry pulls. Existing management clusters and SSH workers
are not fed: they pull themselves.

Pulumi runs a Command only when its inputs change, so a second `pulumi up` with nothing changed moves
nothing; a replaced node (new container id) is loaded again.
"""

from __future__ import annotations

import re

import pulumi

from components.docker.sources import sources
from components.shell import script_command
from model.config import LabConfig
from model.docker_lab.images import node_images, to_load
from model.docker_lab.sources import image_item
from model.image_ref import ImageRef
from model.node_container import node_platform


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class ImageCache(pulumi.ComponentResource):
    """Host-side pulls of every image a node container will run (one Command per image)."""

    pulls: dict[str, pulumi.Resource]

    def __init__(self, name: str, lab: LabConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpulab:index:ImageCache", name, None, opts)
        self._name, self._lab = name, lab
        self.platform = node_platform()
        self.sources = sources(lab)
        parts = [part for part in ("management", *(t.name for t in lab.tenants)) if self.feeds(part)]
        wanted = {ref for part in parts for ref in to_load(lab, part)}
        if self.sources is not None:
            # Offline, the node images come from the cache too (kind and the Docker provider would pull them).
            wanted |= {ImageRef.parse(image) for image in node_images(lab)}
        self.pulls = {
            ref.tagged: script_command(
                f"{name}-pull-{_slug(ref.tagged.split('/', 1)[1])}",
                "pull-image.sh",
                environment={"IMAGE": ref.full, "TAGGED": ref.tagged, "PLATFORM": self.platform, **self._cached(ref)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            for ref in sorted(wanted)
        }
        self.register_outputs({"images": sorted(self.pulls), "platform": self.platform})

    def _cached(self, ref: ImageRef) -> dict[str, str]:
        """A pull's archive and image id in the source cache (nothing without one)."""
        if self.sources is None:
            return {}
        item = image_item(ref.full)
        return {"ARCHIVE": str(self.sources.path(item)), "IMAGE_ID": self.sources.entries[item.key].image_id}

    def node_image(self, image: str) -> tuple[str, list[pulumi.Resource]]:
        """The name a node container is made from, and what must come first. From a source cache: its tag, once
        loaded (a loaded image has no registry digest to be found by, and its id was checked against the cache's
        record instead); otherwise the pinned reference, which the Docker provider or kind pulls."""
        if self.sources is None:
            return image, []
        tagged = ImageRef.parse(image).tagged
        return tagged, [self.pulls[tagged]]

    def feeds(self, part: str) -> bool:
        """Whether gpulab loads images into this part's node: kind's node and container workers only."""
        if part == "management":
            return self._lab.management.mode == "kind"
        return next(t for t in self._lab.tenants if t.name == part).worker_mode == "container"

    def load(
        self,
        name: str,
        part: str,
        node: pulumi.Input[str],
        node_id: pulumi.Input[str],
        parent: pulumi.Resource,
        after: list[pulumi.Resource],
    ) -> pulumi.Resource:
        """A Command that loads `part`'s images into the node container `node`, after `after` (the node)."""
        refs = to_load(self._lab, part)
        return script_command(
            name,
            "load-images.sh",
            environment={
                "NODE": node,
                "NODE_ID": node_id,  # a replaced node is loaded again
                "IMAGES": " ".join(ref.tagged for ref in refs),
                "PLATFORM": self.platform,
                "TIMEOUT": "120",
            },
            opts=pulumi.ResourceOptions(parent=parent, depends_on=[*after, *(self.pulls[ref.tagged] for ref in refs)]),
        )
