"""Where process mode's providers were before components/process/: the engine keeps each dynamic resource's provider
pickled by reference (module and class name: pulumi.dynamic serialize_provider, dill), and a stack made before
the move names this module in its state. Its refresh and its destroy load the provider from here, and an
unchanged resource keeps that record until it is next updated, so this module stays while such states may.
"""

from components.process.control_plane import ControlPlaneProvider
from components.process.gpu_node import GpuInventoryProvider, HamiProvider
from components.process.kwok_workers import KwokNodesProvider

__all__ = ["ControlPlaneProvider", "GpuInventoryProvider", "HamiProvider", "KwokNodesProvider"]
