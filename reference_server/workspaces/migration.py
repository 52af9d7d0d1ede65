"""Stores written before a column existed get it on open, each old row with its default: a
store from before workspaces keeps every row, in the default workspace."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

__all__ = ["add_columns"]


def add_columns(connection: sqlite3.Connection, table: str, columns: Mapping[str, str]) -> None:
    """Add each of `columns` (name -> its SQL type and default) that `table` lacks."""
    present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    with connection:
        for name, declaration in columns.items():
            if name not in present:
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
