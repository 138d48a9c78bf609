"""The decoding methods a benchmark compares, and the ablations of FastCoder.

A variant is a name, a :class:`DecodeConfig` and which datastores it may search.
REST gets D_c only; FastCoder gets D_r (when the suite has one) and D_c; the
ablations (``--ablate``, the paper's Table II plus our live-context source) switch one
part of FastCoder off at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastcoder.config import DecodeConfig
from fastcoder.errors import FastCoderError

BASE_METHODS = ("ar", "pld", "rest", "fastcoder", "fastcoder-paper")
# fastcoder-paper: the paper's fixed settings (DecodeConfig.paper(): D_r + D_c + CACHE with
# l = 50, α = β = 1 raw counts, skip tokens, 64 draft tokens, no live context)

# the real peer: transformers' own generate() on the same tasks, stop rule and process
HF_METHODS: dict[str, tuple[str, dict]] = {
    "hf-ar": ("transformers generate()", {}),
    "hf-static": ('transformers generate(cache_implementation="static")', {"cache_implementation": "static"}),
    "hf-pld": ("transformers generate(prompt_lookup_num_tokens=10)", {"prompt_lookup_num_tokens": 10}),
}

# the same methods on a second engine over the same model, to measure side by side what
# a verifier setting gives: "explicit" computes attention as two matrix products where it
# probed that batch-invariant and faster (explicitAttention auto; fastcoder/attention.py);
# "chain" has no path attention (Verifier.paths): on the CPU in bf16 it accepts along the
# path of first children only, as before the forty-sixth session (2026-11-29)
OTHER_ENGINES: dict[str, dict] = {"explicit": {"explicit_attention": None}, "chain": {"path_attention": False}}
ENGINE_METHODS: dict[str, tuple[str, str, str]] = {
    # name: (base method, engine, label)
    "ar-explicit": ("ar", "explicit", "ar with the explicit attention where it pays (explicitAttention auto)"),
    "fastcoder-explicit": ("fastcoder", "explicit", "fastcoder with the explicit attention where it pays (explicitAttention auto)"),
    "ar-chain": ("ar", "chain", "ar without path attention (as before the forty-sixth session, 2026-11-29)"),
    "fastcoder-chain": ("fastcoder", "chain", "fastcoder without path attention: the first children's path only on the CPU in bf16 (as before the forty-sixth session)"),
}

ABLATIONS: dict[str, tuple[str, dict]] = {
    # name: (what it removes, DecodeConfig changes); "no-dr" / "no-dc" drop D_r / D_c from the sources
    "fastcoder-no-dr": ("without D_r", {}),
    # D_c was ~60% of the suite's drafting time; on a GPU host, where drafting costs ~3x this
    # CPU's, leaving it out is estimated to pay (draft_cost probe: 1.25-1.45x -> 1.64x AR at host
    # factor 3 with the H100's curve; 1.92x -> 1.88x with the CPU's): measure it on the GPU
    "fastcoder-no-dc": ("without D_c", {}),
    "fastcoder-no-cache": ("without the CACHE", {"use_cache": False}),
    "fastcoder-no-gate": ("with every source asked at every draft (before 2026-11-27)", {"source_gate": False}),
    "fastcoder-no-skip": ("without skip tokens and the missing table", {"use_skip": False, "use_missing_table": False}),
    "fastcoder-no-context": ("without the live context", {"use_context": False}),
    "fastcoder-branches": ("with the side branches a batch-invariant verifier cannot accept (verified before 2026-11-27)",
                           {"side_branches": True}),
    "fastcoder-no-agree": ("with the draft budget blind to how many sources drafted a node (before 2026-11-27)",
                           {"source_agreement": False}),
    "fastcoder-calib": ("with trees priced by the steps timed, not by the cost curve alone (off by default)",
                        {"step_calibration": True}),
    "fastcoder-n2": ("with matches of two tokens or more only (n_min 2, the default before 2026-11-24)", {"n_min": 2}),
    "fastcoder-no-recycle": ("without token recycling (the model's own top-k per token; before 2026-11-29)", {"recycle_k": 0}),
}
"""Each ablation may also be named in ``--methods`` alone (``--ablate`` runs them all)."""


@dataclass(frozen=True)
class Variant:
    name: str
    config: DecodeConfig
    use_dr: bool = False
    use_dc: bool = False
    label: str = ""
    hf_kwargs: dict | None = None  # set for the hf-* rows: extra generate() arguments
    engine: str = ""  # which of the harness's engines runs it ("": the main one; else a key of OTHER_ENGINES)

    def describe(self) -> dict:
        import dataclasses

        cfg = dataclasses.asdict(self.config)
        out = {"name": self.name, "label": self.label, "use_dr": self.use_dr, "use_dc": self.use_dc, "config": cfg}
        if self.hf_kwargs is not None:
            out["hf_kwargs"] = dict(self.hf_kwargs)
        return out


def parse_methods(text: str) -> list[str]:
    names = [m.strip().lower() for m in text.split(",") if m.strip()]
    known = BASE_METHODS + tuple(HF_METHODS) + tuple(ENGINE_METHODS) + tuple(ABLATIONS)
    bad = [m for m in names if m not in known]
    if bad:
        raise FastCoderError(f"unknown method(s) {', '.join(bad)}; choose from {', '.join(known)}")
    if not names:
        raise FastCoderError("--methods is empty")
    seen: list[str] = []
    for m in names:
        if m not in seen:
            seen.append(m)
    if "ar" not in seen:  # every comparison is against AR
        seen.insert(0, "ar")
    return seen


def make_variants(methods: list[str], *, ablate: bool, max_new_tokens: int, seed: int = 0) -> list[Variant]:
    out = []
    for m in methods:
        if m == "fastcoder-paper":
            cfg = DecodeConfig.paper(max_new_tokens=max_new_tokens, seed=seed)
            out.append(Variant(m, cfg, use_dr=True, use_dc=True, label="FastCoder with the paper's settings"))
            continue
        if m in HF_METHODS:
            label, kwargs = HF_METHODS[m]
            cfg = DecodeConfig(method="ar", max_new_tokens=max_new_tokens, seed=seed)
            out.append(Variant(m, cfg, label=label, hf_kwargs=kwargs))
            continue
        if m in ABLATIONS:
            out.append(_ablation(m, max_new_tokens, seed))
            continue
        if m in ENGINE_METHODS:
            base, engine, label = ENGINE_METHODS[m]
            cfg = DecodeConfig(method=base, max_new_tokens=max_new_tokens, seed=seed)
            out.append(Variant(m, cfg, use_dr=base == "fastcoder", use_dc=base == "fastcoder", label=label, engine=engine))
            continue
        cfg = DecodeConfig(method=m, max_new_tokens=max_new_tokens, seed=seed)
        out.append(Variant(m, cfg, use_dr=(m == "fastcoder"), use_dc=m in ("rest", "fastcoder"), label=m))
    if ablate:
        out += [_ablation(name, max_new_tokens, seed) for name in ABLATIONS if name not in methods]
    return out


def _ablation(name: str, max_new_tokens: int, seed: int) -> Variant:
    label, changes = ABLATIONS[name]
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=max_new_tokens, seed=seed, **changes)
    return Variant(name, cfg, use_dr=name != "fastcoder-no-dr", use_dc=name != "fastcoder-no-dc", label=f"FastCoder {label}")
