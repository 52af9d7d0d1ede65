"""Image input for mlx-vlm models: prompts with images, prepared without MLX.

A vision model's chat template renders each image as one placeholder (`<image>`); the model's
image processor (transformers', NumPy and Pillow only) resizes and tiles each image and says how
many tiles it made, and the placeholder is expanded into that many tiles' image tokens. The
token count therefore follows from the image sizes alone, and `count_tokens` and generation
share this one function, so they agree. The pixel arrays travel with the job to the worker
thread, which runs the vision tower (vision_worker.py).

Only processors of the Idefics3 family (SmolVLM, Idefics3), which expose the expansion step,
are supported; other mlx-vlm models are refused at load with a clear message.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy

from .errors import TokenizerError

if TYPE_CHECKING:
    from .base import ImagePart
    from .tokenizer import ChatTokenizer

__all__ = ["ImagePreparer", "VisionPrompt"]


@dataclass(frozen=True, slots=True)
class VisionPrompt:
    """Prompt tokens with every image's tokens expanded, and the processor's pixel arrays
    (NumPy, keyed by the vision tower's argument names)."""

    tokens: list[int]
    arrays: dict[str, Any]


class ImagePreparer:
    """Turns a rendered prompt and its images into a `VisionPrompt` (thread-safe, no MLX)."""

    def __init__(self, processor: Any, tokenizer: ChatTokenizer, *, max_edge: int | None = None) -> None:
        """`processor`: mlx-vlm's processor of the model; `max_edge` caps the longest edge images
        are resized to below the processor's own (fewer tiles: the vision tower is slow on a
        CPU)."""
        expand = getattr(processor, "expand_text_with_image_tokens", None)
        images = getattr(processor, "image_processor", None)
        if expand is None or images is None:
            raise TokenizerError(
                f"image input for {type(processor).__name__} is not supported "
                "(only the Idefics3 / SmolVLM processor family is)"
            )
        self._expand = expand
        self._images = images
        self._tokenizer = tokenizer
        self.placeholder = str(getattr(processor, "image_token", "<image>"))
        size = getattr(images, "size", None)
        # A dict in older transformers, a SizeDict (attributes) in newer ones.
        longest = size.get("longest_edge") if isinstance(size, dict) else getattr(size, "longest_edge", None)
        self._max_edge = int(longest) if isinstance(longest, int) else None
        if max_edge is not None:
            self._max_edge = min(self._max_edge or max_edge, max_edge)
        # transformers' processors are not documented thread-safe; prompts are prepared in
        # worker threads of the event loop, one at a time.
        self._lock = threading.Lock()

    def prepare(self, text: str, images: Sequence[ImagePart]) -> VisionPrompt:
        """`text` (the rendered prompt, one placeholder per image, in order) → tokens and arrays."""
        from PIL import Image

        if text.count(self.placeholder) != len(images):
            raise TokenizerError(
                f"the chat template placed {text.count(self.placeholder)} image(s) for {len(images)}"
            )
        decoded = []
        for image in images:
            with Image.open(io.BytesIO(image.data)) as opened:
                decoded.append(opened.convert("RGB"))
        rows: list[int] = []
        cols: list[int] = []
        pieces: dict[str, list[Any]] = {}
        with self._lock:
            # One image at a time, each resized to its own longest edge (capped), never up to
            # the processor's: SmolVLM's would enlarge every image to its full size, so a
            # 40 px and a 400 px image would cost the same; here a larger one costs more, as
            # the API's own formula has it.
            for picture in decoded:
                kwargs: dict[str, Any] = {"return_row_col_info": True}
                if self._max_edge is not None:
                    kwargs["size"] = {"longest_edge": min(max(picture.size), self._max_edge)}
                out = self._images([[picture]], **kwargs)
                rows += out["rows"][0]
                cols += out["cols"][0]
                for key, value in out.items():
                    if key not in ("rows", "cols"):
                        pieces.setdefault(key, []).append(value)
            expanded = self._expand([text], image_rows=[rows], image_cols=[cols])[0]
        # Every tile has the tile size, so the images' tiles line up along the tile axis.
        arrays = {key: numpy.concatenate(values, axis=1) for key, values in pieces.items()}
        return VisionPrompt(self._tokenizer.encode(expanded), arrays)
