"""Process mode's components (`runtime: process`): a tenant's control plane as local processes, its workers as
KWOK nodes or as node containers on the lab's network, and HAMi as a local process with the simulated cards. Each
dynamic resource's provider stands beside the component that makes it; lifecycle.py is what they share."""
