"""Plumbline's reference server: the Anthropic Messages API on a local MLX model."""

from __future__ import annotations

from reference_server.app import create_app
from reference_server.settings import Settings

__all__ = ["Settings", "__version__", "create_app"]

__version__ = "0.1.0"
