"""When citations are served: the request's citable documents, refused with structured outputs
(on documents or on web fetch, as the API refuses them) and with tools the model may call (this
server's own limit: the cited answer's grammar leaves no room for calls; pages fetched to cite
are server_tools/citing.py's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reference_server.content import RenderedDocument
from reference_server.errors import InvalidRequestError
from reference_server.server_tools.definitions import WebFetchConfig
from reference_server.tools.definitions import ToolDefinition

from .documents import CitationPlan, plan_citations

__all__ = ["citation_plan"]


def citation_plan(
    documents: Sequence[RenderedDocument],
    tools: Sequence[ToolDefinition],
    *,
    may_call: bool,
    output_schema: Mapping[str, Any] | None,
) -> CitationPlan | None:
    """The plan to cite the request's `documents` (None: none is citable)."""
    plan = plan_citations(documents)
    if output_schema is not None and any(
        isinstance(tool.server, WebFetchConfig) and tool.server.citations for tool in tools
    ):
        raise InvalidRequestError(
            "output_config.format: structured outputs cannot be used with citations enabled on web fetch"
        )
    if plan is None:
        return None
    if output_schema is not None:
        raise InvalidRequestError(
            "output_config.format: structured outputs cannot be used with citations enabled on documents"
        )
    if may_call:
        raise InvalidRequestError(
            "tools: citations with tools the model may call are not served by this server; send"
            ' tool_choice {"type": "none"} or the documents without citations'
        )
    return plan
