"""Plumbline: an independent conformance suite for the Anthropic Messages API."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
