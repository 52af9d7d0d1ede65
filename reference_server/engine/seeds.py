"""Each sampled generation's random seed, from what makes two requests the same request.

Sampling never draws from MLX's global random state (which every generation in the process
would share, so an answer would depend on what else ran, and in which order): each job has its
own key (sampler.py), seeded here from the engine's seed (the server's `--seed`), the prompt's
token ids, the images' digests (two different images render the same tokens), and the sampling
controls. Neither `max_tokens` nor anything the engine never sees (such as streaming) enters it,
so the same request gives the same tokens streamed or not, alone, in a batch, or beside others.
No MLX here: the event loop computes it when it queues the job (mlx.py).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

from .base import Sampling

__all__ = ["sampling_seed"]

# Changes every derived seed: bump it only when reproducing old answers no longer matters.
_DOMAIN = b"plumbline-sampling-v1"


def sampling_seed(
    engine_seed: int, prompt: Sequence[int], sampling: Sampling, images: Sequence[str] = ()
) -> int:
    """A 64-bit seed for one generation's random key (see the module docstring)."""
    digest = hashlib.blake2b(_DOMAIN, digest_size=8)
    controls = (engine_seed, sampling.temperature, sampling.top_p, sampling.top_k, sampling.seed)
    digest.update(repr(controls).encode())
    digest.update(struct.pack(f"<{len(prompt)}I", *prompt))
    for image in images:
        digest.update(b"\0" + image.encode())
    return int.from_bytes(digest.digest(), "little")
