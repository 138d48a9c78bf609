"""The previous eager verifier (a growing DynamicCache, host-built mask, index_select
compaction), kept ONLY as the reference the static path is tested against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
from transformers import DynamicCache

from fastcoder.trie import DraftTree


@dataclass
class EagerKV:
    """A KV cache and the token ids whose keys/values it holds, in order."""

    cache: DynamicCache | None = None
    ids: list[int] = field(default_factory=list)

    def reset(self) -> None:
        self.cache = None
        self.ids = []

    def common(self, ids: Sequence[int]) -> int:
        """How many of ``ids``, from the first, this cache holds (as ``KVState.common``)."""
        n = 0
        while n < min(len(self.ids), len(ids)) and self.ids[n] == ids[n]:
            n += 1
        return n


@dataclass
class StepResult:
    accepted: list[int]  # node indices along the accepted path
    bonus: int  # the model's token after the accepted path
    margins: list[float] | None = None  # top-2 logit margin per emitted token (when asked)
    topk: list[list[int]] | None = None  # (step(topk=k)) each row's top k next tokens: the root's row, then the nodes'


class EagerVerifier:
    """Runs prefill and tree-verification forwards for one model (reference only)."""

    max_nodes = 127

    def __init__(self, model: torch.nn.Module, *, record_margins: bool = False) -> None:
        self.model = model
        param = next(model.parameters())
        self.device = param.device
        self.dtype = param.dtype
        self.record_margins = record_margins

    # ---------------------------------------------------------------- prefill
    @torch.inference_mode()
    def prefill(self, kv: EagerKV, ids: Sequence[int], reserve: int | None = None) -> tuple[int, int, float | None]:
        """Make ``kv`` hold ``ids[:-1]``… and compute the greedy next token.

        Keeps the longest common prefix already in ``kv`` (at least one token is fed
        so there are logits). Returns (next token, tokens actually prefilled, margin).
        """
        ids = [int(t) for t in ids]
        common = len(ids) - self.begin(kv, ids)
        new = ids[common:]
        input_ids = torch.tensor([new], dtype=torch.long, device=self.device)
        pos = torch.arange(common, len(ids), device=self.device).unsqueeze(0)
        # logits_to_keep=1: the lm_head runs on the last position only (a 151k-vocab
        # head over a 2k-token prompt would cost a third of the prefill and 1 GB)
        out = self.model(
            input_ids=input_ids, position_ids=pos, past_key_values=kv.cache, use_cache=True, logits_to_keep=1
        )
        logits = out.logits[0, -1]
        kv.ids = ids
        # the cache now holds all of ids; the decode loop's convention is that the
        # last committed token (the first generated one) is *not* in the cache.
        return int(torch.argmax(logits)), len(new), (self._margin(logits) if self.record_margins else None)

    def begin(self, kv: EagerKV, ids: Sequence[int], reserve: int | None = None) -> int:
        """Keep the longest common prefix of ``kv`` and ``ids`` (at most all but the last
        token); return how many of ``ids`` are not cached."""
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError("empty prompt")
        common = 0
        if kv.cache is not None:
            limit = min(len(kv.ids), len(ids) - 1)
            while common < limit and kv.ids[common] == ids[common]:
                common += 1
            drop = len(kv.ids) - common
            if common == 0:
                kv.reset()
            elif drop:
                kv.cache.crop(-drop)
                kv.ids = kv.ids[:common]
        if kv.cache is None:
            kv.cache = DynamicCache(config=self.model.config)
            kv.ids = []
        return len(ids) - common

    # ---------------------------------------------------------------- one step
    @torch.inference_mode()
    def step(self, kv: EagerKV, root: int, tree: DraftTree, *, forced: Sequence[int] = (), allowed=None, stop=None,
             topk: int = 0) -> StepResult:  # fmt: skip
        """Verify ``tree`` below ``root`` (the last committed token, not yet in kv).
        ``forced`` tokens follow ``root`` and are kept whatever the model says; the tree
        hangs below them (run as one tree: the chain of forced tokens, ``tree`` below it).
        ``allowed``: the first token after them is the greedy choice among these ids."""
        forced = [int(t) for t in forced]
        f = len(forced)
        chain = DraftTree.chain(forced, "forced")
        whole = DraftTree(chain.tokens + tree.tokens, chain.parents + [p + f if p >= 0 else f - 1 for p in tree.parents],
                          chain.depths + [d + f for d in tree.depths], chain.sources + tree.sources,
                          chain.probs + tree.probs)  # fmt: skip
        past = len(kv.ids)
        q = len(whole) + 1
        input_ids = torch.tensor([[root] + whole.tokens], dtype=torch.long, device=self.device)
        position_ids = whole.position_ids(past, self.device)
        kwargs = {}
        if len(whole):
            kwargs["attention_mask"] = whole.attention_mask(past, self.dtype, self.device)
        out = self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            past_key_values=kv.cache,
            use_cache=True,
            **kwargs,
        )
        logits = out.logits[0]
        self.last_logits = logits[f:]
        greedy = torch.argmax(logits, dim=-1).tolist()  # argmax in the model's dtype: exact, no copy
        if allowed is not None:
            a = torch.as_tensor(list(allowed), dtype=torch.long, device=self.device)
            greedy[f] = int(a[int(torch.argmax(logits[f].index_select(0, a)))])
        # walk the tree from its root (input row f)
        children = tree.children()
        accepted: list[int] = []
        row = 0  # tree row (0 = its root, i + 1 = node i) = input row row + f
        while True:
            nxt = children[row].get(greedy[row + f]) if row < len(children) else None
            if nxt is None:
                break
            accepted.append(nxt)
            row = nxt + 1
        bonus = greedy[row + f]
        margins = None
        if self.record_margins:
            rows = [f] + [i + 1 + f for i in accepted]
            margins = [self._margin(logits[r]) for r in rows]
        # KV compaction: keep past + root + forced + accepted nodes
        keep_rows = list(range(f + 1)) + [i + 1 + f for i in accepted]
        if len(keep_rows) < q:
            idx = torch.tensor(list(range(past)) + [past + r for r in keep_rows], device=self.device)
            for layer in kv.cache.layers:
                if getattr(layer, "keys", None) is not None and layer.keys.numel():
                    layer.keys = layer.keys.index_select(-2, idx)
                    layer.values = layer.values.index_select(-2, idx)
        kv.ids = kv.ids + [root] + forced + [tree.tokens[i] for i in accepted]
        top = torch.topk(logits[f:], topk, dim=-1).indices.tolist() if topk else None  # root row, then the nodes
        return StepResult(accepted=accepted, bonus=int(bonus), margins=margins, topk=top)

    @staticmethod
    def _margin(logits: torch.Tensor) -> float | None:
        top = torch.topk(logits.float(), 2).values
        return float(top[0] - top[1])


def main(argv: list[str] | None = None) -> int:
    """AR on the static verifier against AR on this old eager verifier, interleaved task
    by task in one process, on the prompts a ``fastcoder bench`` run recorded (each
    generates exactly as many tokens as that run's AR did, without stop rules)::

        python tests/eager_reference.py --run bench-out/DIR [--model M] [--dtype D] [--limit N]
    """
    import argparse
    import json
    import os
    from pathlib import Path

    from fastcoder.config import DecodeConfig
    from fastcoder.decode import generate
    from fastcoder.drafters import make_drafter
    from fastcoder.engine import Engine
    from fastcoder.models import load_model
    from fastcoder.session import Session

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None, help="a fastcoder bench output directory (tasks.jsonl)")
    ap.add_argument("--steps", type=Path, default=None, metavar="FILE",
                    help="instead: whole-step time per bucket, static vs eager, on a prompt cut from FILE")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--new", type=int, default=32, help="--steps: also generate this many AR tokens with each path")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.steps is not None:
        return step_costs(args)
    records = [json.loads(x) for x in (args.run / "tasks.jsonl").read_text().splitlines() if x.strip()][: args.limit]
    loaded = load_model(args.model, dtype=args.dtype, progress=False)
    engine = Engine.from_loaded(loaded)
    eager = EagerVerifier(loaded.model)
    load0 = os.getloadavg()
    sums = {"static": [0.0, 0], "eager": [0.0, 0]}
    rows, same = [], 0
    for i, rec in enumerate(records + records[:1]):  # the first task once more as warm-up
        warm = i == 0
        prompt, n = rec["prompt_ids"], max(2, len(rec["results"]["ar"]["tokens"]))
        cfg = DecodeConfig(method="ar", max_new_tokens=n)
        out = {}
        for which in (("static", "eager") if i % 2 else ("eager", "static")):
            if which == "static":
                g = engine.generate(prompt, cfg, session=Session(cfg))
            else:
                s = Session(cfg)
                s.kv = EagerKV()
                g = generate(eager, engine.tokenizer, make_drafter(cfg, None), prompt, cfg, session=s)
            out[which] = g
        if warm:
            continue
        for k, g in out.items():
            sums[k][0] += g.stats.decode_s
            sums[k][1] += g.stats.new_tokens - 1
        same += out["static"].tokens == out["eager"].tokens
        rows.append({"id": rec["id"], "tokens": n, **{f"{k}_ms_per_token": round(g.stats.ms_per_token, 2) for k, g in out.items()}})
        print(rows[-1], flush=True)
    ms = {k: 1000.0 * s / max(t, 1) for k, (s, t) in sums.items()}
    summary = {"tasks": len(rows), "static_ms_per_token": ms["static"], "eager_ms_per_token": ms["eager"],
               "static_speedup_vs_eager": ms["eager"] / ms["static"], "identical_tokens": same,
               "loadavg_start": list(load0), "loadavg_end": list(os.getloadavg())}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


def step_costs(args) -> int:
    """Whole ``step`` time per bucket (chain trees of bucket - 1 nodes, rolled back after
    each step) on a ``--context``-token cache, static and eager verifiers interleaved
    round by round (minimum over rounds), then ``--new`` AR tokens from each path and
    from transformers' generate() (plain and static cache), interleaved."""
    import json
    import os
    import time

    from fastcoder.config import DecodeConfig
    from fastcoder.decode import generate
    from fastcoder.drafters import make_drafter
    from fastcoder.engine import Engine
    from fastcoder.models import load_model
    from fastcoder.session import Session
    from fastcoder.trie import DraftTree

    load0 = os.getloadavg()
    loaded = load_model(args.model, dtype=args.dtype, progress=False)
    tok = loaded.tokenizer
    ids = tok(args.steps.read_text(), add_special_tokens=False)["input_ids"][: args.context + 200]
    prompt, extra = ids[: args.context], ids[args.context :]
    engine = Engine.from_loaded(loaded)
    from fastcoder.verifier import KVState

    paths = {"static": (engine.verifier, KVState()), "eager": (EagerVerifier(loaded.model), EagerKV())}
    for v, kv in paths.values():
        v.prefill(kv, prompt, reserve=256)
    buckets = [b for b in engine.verifier.buckets if b <= 64]
    best = {name: {b: float("inf") for b in buckets} for name in paths}
    for rnd in range(args.rounds + 1):
        for name in (("static", "eager") if rnd % 2 else ("eager", "static")):
            v, kv = paths[name]
            for b in buckets:
                tree = DraftTree.chain(extra[1:b], "probe")
                base = len(kv.ids)
                t0 = time.perf_counter()
                v.step(kv, extra[0], tree)
                dt = time.perf_counter() - t0
                if rnd:
                    best[name][b] = min(best[name][b], dt)
                if isinstance(kv, EagerKV):
                    drop = len(kv.ids) - base
                    if drop:
                        kv.cache.crop(-drop)
                        kv.ids = kv.ids[:base]
                else:
                    kv.truncate(base)
        print(f"round {rnd}: " + json.dumps({n: {b: round(1000 * s, 1) for b, s in d.items()} for n, d in best.items()}), flush=True)
    gen = {}
    cfg = DecodeConfig(method="ar", max_new_tokens=args.new)
    from fastcoder.decode import _eos_ids
    from fastcoder_bench.suite.hf_peer import hf_generate

    for rnd in range(2):
        for name in ("static", "eager", "hf-ar", "hf-static"):
            if name == "static":
                g = engine.generate(prompt, cfg, session=Session(cfg))
                st, toks = g.stats, g.tokens
            elif name == "eager":
                s = Session(cfg)
                s.kv = EagerKV()
                g = generate(paths["eager"][0], tok, make_drafter(cfg, None), prompt, cfg, session=s)
                st, toks = g.stats, g.tokens
            else:
                r = hf_generate(loaded.model, tok, prompt, max_new_tokens=args.new, stop_fn=None,
                                eos=_eos_ids(tok, loaded.model), name=name,
                                kwargs={"cache_implementation": "static"} if name == "hf-static" else {})
                st, toks = r["stats"], r["tokens"]
                st = type("S", (), {"ms_per_token": st["ms_per_token"], "prefill_s": st["prefill_s"]})
            if rnd:
                gen[name] = {"ms_per_token": round(st.ms_per_token, 1), "prefill_ms": round(1000 * st.prefill_s),
                             "tokens": len(toks), "same_as_static": toks == gen.get("static", {}).get("_t", toks)}
                gen[name]["_t"] = toks
        print(f"generation round {rnd} done", flush=True)
    for g in gen.values():
        g.pop("_t", None)
    out = {"model": args.model, "dtype": args.dtype, "context": args.context,
           "step_ms_min": {n: {str(b): round(1000 * s, 1) for b, s in d.items()} for n, d in best.items()},
           "ar_generation": gen, "loadavg_start": list(load0), "loadavg_end": list(os.getloadavg())}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
