"""Whole ``Verifier.step`` time per bucket, folded GQA attention (fastcoder/attention.py)
against the model's original ``sdpa``, on a real model and a ``--context``-token cache::

    nice -n 19 .venv/bin/python tests/folded_attention_bench.py [--dtype bfloat16] [--context 1500]

Chain trees of bucket - 1 nodes, rolled back after each step (the cache length stays
put); the prompt is prefilled once and both attentions read that cache; they are
interleaved step by step (the model is switched with ``set_attn_implementation``
between them, the order alternates), minimum over rounds. Also checks that both give the same greedy tokens.

``--micro``: instead, one layer's attention call alone on random tensors of the
Qwen2.5-Coder-0.5B shapes (14 query heads, 2 KV heads, head dim 64) and a tree mask:
transformers' ``sdpa_attention_forward`` (repeat_kv), SDPA's ``enable_gqa=True`` with
the mask, and the fold (its mask fold included, i.e. the first layer's cost).
"""

from __future__ import annotations

import argparse
import json
import os
import sysconfig
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import torch

    from fastcoder import attention
    from fastcoder.models import load_model
    from fastcoder.trie import DraftTree
    from fastcoder.verifier import KVState, Verifier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--context", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--buckets", default="1,4,8,16,32,64")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--micro", action="store_true")
    args = ap.parse_args(argv)
    if args.micro:
        return micro(args)
    load0 = os.getloadavg()
    loaded = load_model(args.model, dtype=args.dtype, progress=False)
    model, tok = loaded.model, loaded.tokenizer
    lib = Path(sysconfig.get_paths()["stdlib"])
    text = "".join((lib / n).read_text(encoding="utf-8") for n in ("textwrap.py", "shlex.py", "argparse.py"))
    ids = tok(text, add_special_tokens=False)["input_ids"][: args.context + 200]
    prompt, extra = ids[: args.context], ids[args.context :]
    buckets = [int(b) for b in args.buckets.split(",")]
    impls = {"sdpa": "sdpa", "folded": attention.NAME}
    v = Verifier(model, fold_gqa=False)
    if attention.unsupported(model) is not None:
        raise SystemExit(f"the fold does not apply: {attention.unsupported(model)}")
    # one cache for both: the prompt is prefilled once (original attention); a step
    # writes its rows past the prompt and is rolled back, so both read the same past
    kv = KVState()
    model.set_attn_implementation("sdpa")
    t0 = time.perf_counter()
    v.prefill(kv, prompt, reserve=256)
    print(f"prefill: {time.perf_counter() - t0:.1f} s", flush=True)
    best = {name: {b: float("inf") for b in buckets} for name in impls}
    greedy = {name: {} for name in impls}
    t_start = time.perf_counter()
    for rnd in range(args.rounds + 1):  # round 0: warm-up
        for b in buckets:  # interleaved step by step: both see the same load
            tree = DraftTree.chain(extra[1:b], "probe")
            for name in (("sdpa", "folded") if (rnd + b) % 2 else ("folded", "sdpa")):
                model.set_attn_implementation(impls[name])
                base = len(kv.ids)
                t0 = time.perf_counter()
                r = v.step(kv, extra[0], tree)
                dt = time.perf_counter() - t0
                greedy[name][b] = (r.accepted, r.bonus, v.last_logits.argmax(-1).tolist())
                if rnd:
                    best[name][b] = min(best[name][b], dt)
                kv.truncate(base)
        print(f"round {rnd} ({time.perf_counter() - t_start:.0f} s): "
              + json.dumps({n: {b: round(1000 * s, 1) for b, s in d.items()} for n, d in best.items()}), flush=True)
    out = {
        "model": args.model,
        "dtype": args.dtype,
        "context": args.context,
        "torch_threads": torch.get_num_threads(),
        "step_ms_min": {n: {str(b): round(1000 * s, 1) for b, s in d.items()} for n, d in best.items()},
        "speedup": {str(b): round(best["sdpa"][b] / best["folded"][b], 3) for b in buckets},
        "same_greedy": greedy["sdpa"] == greedy["folded"],
        "loadavg_start": list(load0),
        "loadavg_end": list(os.getloadavg()),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def micro(args) -> int:
    import torch

    from fastcoder.attention import folded_gqa_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    class Layer(torch.nn.Module):
        num_key_value_groups = 7
        is_causal = True
        layer_idx = 0  # every call folds its mask: the first layer's cost

    mod, dtype = Layer().eval(), getattr(torch, args.dtype)
    kvh, g, d = 2, 7, 64

    def gqa(module, q, k, v, m, scaling):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scaling, enable_gqa=True)
        return o.transpose(1, 2).contiguous(), None

    fns = {"sdpa": sdpa_attention_forward, "enable_gqa": gqa, "folded": folded_gqa_attention_forward}
    rows = {}
    torch.manual_seed(0)
    with torch.inference_mode():
        for q_len in [int(b) for b in args.buckets.split(",")]:
            kv_len = args.context + q_len
            q = torch.randn(1, q_len, kvh * g, d, dtype=dtype).transpose(1, 2)
            k, v = torch.randn(1, kvh, kv_len, d, dtype=dtype), torch.randn(1, kvh, kv_len, d, dtype=dtype)
            tree = torch.rand(q_len, q_len) < 0.5
            allowed = torch.cat([torch.ones(q_len, args.context, dtype=torch.bool), tree.tril() | torch.eye(q_len, dtype=torch.bool)], 1)
            mask = torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype).view(1, 1, q_len, kv_len)
            best = {n: float("inf") for n in fns}
            ref = sdpa_attention_forward(mod, q, k, v, mask, scaling=0.125)[0]
            for rnd in range(args.rounds * 4 + 2):
                for n, f in fns.items():
                    t0 = time.perf_counter()
                    out = f(mod, q, k, v, mask, scaling=0.125)[0]
                    if rnd >= 2:
                        best[n] = min(best[n], time.perf_counter() - t0)
                    assert (out.float() - ref.float()).abs().max() <= 1e-2
            rows[q_len] = {n: round(1e6 * t) for n, t in best.items()}
            print(f"q_len {q_len}, kv_len {kv_len}: us per layer {rows[q_len]}", flush=True)
    out = {"dtype": args.dtype, "context": args.context, "torch_threads": torch.get_num_threads(),
           "us_per_layer_min": rows, "loadavg": list(os.getloadavg())}
    print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
