"""Offline preview of a stack: `make plan` (python -m preview)."""
