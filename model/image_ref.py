"""Container image references: parsed, checked and written fully qualified.

The grammar is the one Docker and containerd use (distribution/reference, `reference.go`):
`[registry[:port]/]path[:tag][@sha256:hex]`, where a first component without a dot, a colon or
`localhost` is not a registry, and a name with no registry is on docker.io (`library/` for one
component). Every image gpulab pins or installs goes through `ImageRef.parse`, so a typo in an
override is a config error, not an ImagePullBackOff ten minutes later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_REGISTRY = "docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
_REFERENCE = re.compile(
    rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{TAG.pattern}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?",
    re.ASCII,
)


@dataclass(frozen=True, order=True)
class ImageRef:
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, text: str) -> ImageRef:
        """Raises ValueError naming the expected form."""
        match = _REFERENCE.fullmatch(text) if isinstance(text, str) and len(text) <= 255 else None
        if not match:
            raise ValueError(
                f"{text!r} is not an image reference; write it as [registry/]repository[:tag][@sha256:digest], "
                "e.g. docker.io/library/busybox:1.37.0"
            )
        domain, path = match.group("domain"), match.group("path")
        # distribution/reference: the first component is a registry only if it looks like a host.
        if domain is not None and not ("." in domain or ":" in domain or domain == "localhost"):
            path, domain = f"{domain}/{path}", None
            if path != path.lower():
                raise ValueError(
                    f"{text!r}: repository names are lower case (Docker refuses upper case); write {path.lower()}"
                )
        registry = domain or DEFAULT_REGISTRY
        if registry == DEFAULT_REGISTRY and "/" not in path:
            path = f"library/{path}"
        tag = match.group("tag")
        digest = match.group("digest")
        if tag is None and digest is None:
            raise ValueError(f"{text!r} has neither tag nor digest; pin a tag (and a digest where one is known)")
        return cls(registry, path, tag, digest)

    @property
    def name(self) -> str:
        """registry/repository."""
        return f"{self.registry}/{self.repository}"

    @property
    def tagged(self) -> str:
        """registry/repository:tag, the name a node looks the image up by (no digest)."""
        return f"{self.name}:{self.tag}" if self.tag else self.full

    @property
    def full(self) -> str:
        """registry/repository[:tag][@digest], the exact pin."""
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def __str__(self) -> str:
        return self.full


def image_problem(text: str) -> str | None:
    """Why `text` is not a pinned image reference, or None."""
    try:
        ImageRef.parse(text)
    except ValueError as error:
        return str(error)
    return None
