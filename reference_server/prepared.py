"""A Messages request once serving has validated and tokenized it: what generation needs and
what the answer reports. Its own module so that serving.py (which builds it) and assembly.py
(which turns a generation into the answer) both depend on it, not on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_server.citations import CitationPlan
from reference_server.engine.base import EngineRequest
from reference_server.protocol import ContextManagementResponse
from reference_server.server_tools.plan import ServerToolPlan
from reference_server.thinking import ThinkingPlan

__all__ = ["PreparedMessage"]


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A validated create request, tokenized and ready to generate."""

    request: EngineRequest
    requested_model: str
    input_tokens: int
    stop_sequences: tuple[str, ...]
    # True when the context window, not the caller's max_tokens, bounds generation.
    bounded_by_context: bool
    # The model may write tool calls: its text is parsed for them (tools/calls.py).
    parse_calls: bool = False
    # The generation starts with a reasoning phase (thinking/phases.py).
    thinking: ThinkingPlan | None = None
    # What context management edits did (context_management.py), reported in the response.
    context_management: ContextManagementResponse | None = None
    # The request has server tools the model may call: the turn runs the server-tool loop.
    server_tools: ServerToolPlan | None = None
    # Citations are enabled on the documents: the text is parsed for quotes (citations/).
    citations: CitationPlan | None = None
