"""The faults of the ISO-* properties (part of faults.fault_catalogue): a gateway that sends every
client's request upstream with one key of its own, so that every workspace is one (the shared
key's): what one client made, any other reaches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .fault_proxy import Fault, Request
from .suite import SECOND_API_KEY

__all__ = ["workspace_fault_catalogue"]


def one_upstream_key(api_key: str) -> Callable[[Request], Request]:
    """Requests sent with the second key forwarded with the first."""

    def apply(request: Request) -> Request:
        headers = dict(request.headers)
        changed = False
        for name, value in list(headers.items()):
            if name.lower() == "x-api-key" and value == SECOND_API_KEY:
                headers[name], changed = api_key, True
            elif name.lower() == "authorization" and value == f"Bearer {SECOND_API_KEY}":
                headers[name], changed = f"Bearer {api_key}", True
        return replace(request, headers=headers) if changed else request

    return apply


def workspace_fault_catalogue(api_key: str) -> dict[str, Fault]:
    shared = "every request sent upstream with one key (one workspace for all)"
    faults = ("ISO-001", "ISO-002", "ISO-003")
    return {pid: Fault(shared, request=one_upstream_key(api_key)) for pid in faults}
