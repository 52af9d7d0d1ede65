"""The property modules. pytest collects them; `load_all()` imports them for `--list`."""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["load_all"]


def load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("test_"):
            importlib.import_module(f"{__name__}.{module.name}")
