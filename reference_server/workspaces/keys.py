"""API keys and the workspace each belongs to: the server's `--api-key` (one key, the default
workspace), or a `--keys FILE` of several.

The file is TOML, one `[[key]]` table per key:

    [[key]]
    key = "sk-team-a-..."          # the secret a client sends (x-api-key or Bearer)
    workspace = "wrkspc_team_a"    # the workspace its files, batches, skills, containers live in
    rate_limit_rpm = 60            # optional: this key's own limits (else the server's)
    rate_limit_itpm = 20000
    rate_limit_otpm = 4000

A key is matched in constant time against every key the server holds (never a lookup that stops
at the first match), and is never logged or shown: a `KeyEntry` prints as its workspace.
"""

from __future__ import annotations

import hmac
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from reference_server.ratelimits import Limits

__all__ = ["DEFAULT_WORKSPACE", "KeyEntry", "KeyFileError", "KeyRing"]

# The workspace of the single --api-key, of a server without keys, and of every row a store
# held before stores carried workspaces (their migration puts old rows there).
DEFAULT_WORKSPACE = "default"
_FIELDS = frozenset({"key", "workspace", "rate_limit_rpm", "rate_limit_itpm", "rate_limit_otpm"})


class KeyFileError(ValueError):
    """The keys file cannot be used; the message names the problem (never a key)."""


@dataclass(frozen=True, slots=True)
class KeyEntry:
    key: str = field(repr=False)
    workspace: str
    limits: Limits | None = None  # None: the server's limits


@dataclass(frozen=True, slots=True)
class KeyRing:
    """The keys the server accepts. Empty: no key is asked for (every request is the default
    workspace's), as a server started without --api-key."""

    entries: tuple[KeyEntry, ...] = ()

    @property
    def required(self) -> bool:
        return bool(self.entries)

    @classmethod
    def single(cls, api_key: str | None) -> KeyRing:
        return cls((KeyEntry(api_key, DEFAULT_WORKSPACE),) if api_key else ())

    @classmethod
    def from_file(cls, path: Path, api_key: str | None = None) -> KeyRing:
        """The file's keys (and `api_key`, in the default workspace, beside them)."""
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyFileError(f"{path}: cannot be read ({type(exc).__name__})") from None
        except tomllib.TOMLDecodeError as exc:
            # Its position only: the parser's message may quote the file, a key included.
            where = str(exc).rpartition("(")[2].rstrip(")") or "somewhere"
            raise KeyFileError(f"{path}: not valid TOML ({where})") from None
        tables = data.get("key")
        if not isinstance(tables, list) or not tables or set(data) - {"key"}:
            raise KeyFileError(f"{path}: want one or more [[key]] tables and nothing else")
        entries = [_entry(table, f"{path}: key {n + 1}") for n, table in enumerate(tables)]
        if api_key:
            entries.append(KeyEntry(api_key, DEFAULT_WORKSPACE))
        secrets = [e.key for e in entries]
        if len(set(secrets)) != len(secrets):
            raise KeyFileError(f"{path}: a key is listed twice")
        return cls(tuple(entries))

    def match(self, offered: str | None) -> KeyEntry | None:
        """The entry whose key is `offered`: every key compared, in constant time each."""
        if offered is None:
            return None
        given = offered.encode()
        found = None
        for entry in self.entries:
            if hmac.compare_digest(given, entry.key.encode()):
                found = entry
        return found

    def workspaces(self) -> frozenset[str]:
        return frozenset(entry.workspace for entry in self.entries) or frozenset({DEFAULT_WORKSPACE})


def _entry(table: object, where: str) -> KeyEntry:
    if not isinstance(table, dict):
        raise KeyFileError(f"{where}: not a table")
    unknown = set(table) - _FIELDS
    if unknown:
        raise KeyFileError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    key, workspace = table.get("key"), table.get("workspace")
    # Printable ASCII: a header's value is read as latin-1, so any other key could never match.
    if not isinstance(key, str) or len(key) < 8 or not all(" " < ch < "\x7f" for ch in key):
        raise KeyFileError(f"{where}: `key` must be at least 8 printable ASCII characters, no spaces")
    if not isinstance(workspace, str) or not 1 <= len(workspace) <= 128 or workspace != workspace.strip():
        raise KeyFileError(f"{where}: `workspace` must be 1-128 characters, no outer spaces")
    limits = {name: table.get(f"rate_limit_{name}") for name in ("rpm", "itpm", "otpm")}
    for name, value in limits.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise KeyFileError(f"{where}: `rate_limit_{name}` must be a positive integer")
    own = Limits(limits["rpm"], limits["itpm"], limits["otpm"])
    return KeyEntry(key, workspace, own if own.on else None)
