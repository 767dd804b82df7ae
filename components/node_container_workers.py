"""Where the node containers' providers were before components/process/ (a state made before the move names this
module: components/process_resources.py says why it stays)."""

from components.process.node_container_workers import LabNetworkProvider, NodeContainerProvider

__all__ = ["LabNetworkProvider", "NodeContainerProvider"]
