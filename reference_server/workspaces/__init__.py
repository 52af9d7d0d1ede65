"""Workspaces: each API key belongs to one (keys.py), and the files, batches, skills and
containers made with it are its alone: another workspace's id is a 404, as if it did not exist.
The guard (app.py) puts the request's workspace in its scope (`workspace_of`)."""

from reference_server.workspaces.keys import DEFAULT_WORKSPACE, KeyEntry, KeyFileError, KeyRing
from reference_server.workspaces.scope import key_of, workspace_of

__all__ = ["DEFAULT_WORKSPACE", "KeyEntry", "KeyFileError", "KeyRing", "key_of", "workspace_of"]
