"""The ``robodyn`` command line: one module per command family (``main`` dispatches)."""
from .main import main

__all__ = ["main"]
