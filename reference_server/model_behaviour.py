"""`--model-behaviour`: what the served model accepts, whatever the API version.

`classic` (the default) takes every sampling value the schema allows and an assistant prefill.
`newest` behaves like the Claude models released after Opus 4.6: only the default sampling
values (temperature 1.0, top_p of at least 0.99, no top_k), and no assistant prefill (a final
`assistant` message); each is a 400 `invalid_request_error` naming the field, in the words
the API uses ("`temperature` is deprecated for this model.", "This model does not support
assistant message prefill. The conversation must end with a user message.").

Applied to create requests (and each batch request); count_tokens counts any conversation.
"""

from __future__ import annotations

from typing import Final, Literal

from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams, ServerContentBlockParam
from reference_server.server_tools.history import CALL_TYPES, RESULT_TYPES

__all__ = ["MODEL_BEHAVIOURS", "ModelBehaviour", "check_model_behaviour"]

ModelBehaviour = Literal["classic", "newest"]
MODEL_BEHAVIOURS: Final[tuple[ModelBehaviour, ...]] = ("classic", "newest")
# The smallest top_p the newest models take (the API's deprecation note).
MIN_TOP_P: Final = 0.99


def check_model_behaviour(params: MessageCreateParams, behaviour: ModelBehaviour) -> None:
    """Refuse what the `behaviour`'s model does not take (nothing for `classic`). A null
    sampling value asks for the default, so it is taken."""
    if behaviour == "classic":
        return
    if params.temperature is not None and params.temperature != 1.0:
        raise InvalidRequestError(
            "temperature: `temperature` is deprecated for this model; only the default value 1.0"
            " is accepted (omit it)"
        )
    if params.top_p is not None and params.top_p < MIN_TOP_P:
        raise InvalidRequestError(
            f"top_p: `top_p` is deprecated for this model; only values of at least {MIN_TOP_P}"
            " are accepted (omit it)"
        )
    if params.top_k is not None:
        raise InvalidRequestError("top_k: `top_k` is deprecated for this model (omit it)")
    if _prefilled(params):
        raise InvalidRequestError(
            f"messages.{len(params.messages) - 1}: This model does not support assistant message"
            " prefill. The conversation must end with a user message."
        )


def _prefilled(params: MessageCreateParams) -> bool:
    """The conversation ends with an assistant message that the answer would continue. A turn
    paused on a server tool and sent back (it ends with a server tool's call or result: the
    documented way to resume `pause_turn`) is not a prefill."""
    if not params.messages or params.messages[-1].role != "assistant":
        return False
    content = params.messages[-1].content
    if isinstance(content, str) or not content:
        return True
    last = content[-1]
    return not (isinstance(last, ServerContentBlockParam) and last.type in CALL_TYPES | RESULT_TYPES)
