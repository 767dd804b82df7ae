"""Which wing builds the stack's lab: one line per wing, its folder's one entry (`components/<wing>/lab.py`), as
kind's providers and kwokctl's runtimes are registered. What each wing is like is model/wings.py's row of the same
name; __main__.py asks here once, and nothing else of components/ imports a wing's folder from outside it."""

from __future__ import annotations

from collections.abc import Callable

from components.docker import lab as docker
from components.parts import TenantBuilder
from components.process import lab as process
from model.config import LabConfig

BUILDERS: dict[str, Callable[[LabConfig], TenantBuilder]] = {
    "docker": docker.tenant_builder,
    "process": process.tenant_builder,
}


def tenant_builder(lab: LabConfig) -> TenantBuilder:
    """The stack's wing declares what its tenants share, and returns how it builds each tenant's parts."""
    return BUILDERS[lab.wing.name](lab)
