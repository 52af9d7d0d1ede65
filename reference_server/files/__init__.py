"""The Files API: uploads stored in the data directory (store.py), its endpoints (routes.py),
and `file` sources in document and image blocks read from it (sources.py)."""

from reference_server.files.routes import file_route_handlers
from reference_server.files.store import FileStore

__all__ = ["FileStore", "file_route_handlers"]
