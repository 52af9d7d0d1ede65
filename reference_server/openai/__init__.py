"""The OpenAI-compatible endpoint, `POST /v1/chat/completions`, on the same engine, catalogue
and rules as the Messages API: `requests.py`, `responses.py` and `chunks.py` are OpenAI's wire
shapes, `mapping.py` turns a request into the shared pieces, `serving.py` runs it through
`MessagesService`, `errors.py` speaks OpenAI's error envelope on this route.
"""

from __future__ import annotations

from .chunks import sse_chunks
from .errors import exception_handlers
from .mapping import parse_request
from .serving import CHAT_COMPLETIONS_PATH, ChatCompletionsService

__all__ = [
    "CHAT_COMPLETIONS_PATH",
    "ChatCompletionsService",
    "exception_handlers",
    "parse_request",
    "sse_chunks",
]
