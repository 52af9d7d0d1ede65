"""`/v1/models`: ModelInfo with its capabilities, and the paginated list."""

from __future__ import annotations

from typing import Literal

from .responses import _Out


class CapabilitySupport(_Out):
    supported: bool


class ThinkingTypes(_Out):
    adaptive: CapabilitySupport
    between_tools: CapabilitySupport
    disabled: CapabilitySupport
    enabled: CapabilitySupport


class ThinkingCapability(_Out):
    supported: bool
    types: ThinkingTypes


class EffortCapability(_Out):
    supported: bool
    low: CapabilitySupport
    medium: CapabilitySupport
    high: CapabilitySupport
    max: CapabilitySupport
    xhigh: CapabilitySupport | None = None


class ContextManagementCapability(_Out):
    supported: bool
    clear_thinking_20251015: CapabilitySupport | None = None
    clear_tool_uses_20250919: CapabilitySupport | None = None
    compact_20260112: CapabilitySupport | None = None


class ServerToolsCapability(_Out):
    supported: bool
    code_execution: CapabilitySupport
    web_search: CapabilitySupport


class ModelCapabilities(_Out):
    batch: CapabilitySupport
    citations: CapabilitySupport
    code_execution: CapabilitySupport
    context_management: ContextManagementCapability
    effort: EffortCapability
    image_input: CapabilitySupport
    pdf_input: CapabilitySupport
    server_tools: ServerToolsCapability
    structured_outputs: CapabilitySupport
    thinking: ThinkingCapability


class ModelInfo(_Out):
    type: Literal["model"] = "model"
    id: str
    display_name: str
    created_at: str  # RFC 3339
    max_input_tokens: int | None
    max_tokens: int | None
    capabilities: ModelCapabilities | None
    lifecycle: Literal["active", "deprecated", "retired"] = "active"
    deprecated_at: str | None = None
    retires_at: str | None = None
    line: str | None = None


class ModelListResponse(_Out):
    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None
