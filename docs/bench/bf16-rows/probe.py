"""Why bf16 tree steps differed from one-row (AR) steps on the CPU, and that the
batch-invariant verifier (``Verifier.invariant``, the default there) closes it.

    python docs/bench/bf16-rows/probe.py            # needs qwen2.5-coder-0.5b fetched

1. One packed bf16 linear per Qwen2.5-Coder-0.5B shape, random inputs: how many output
   elements of rows 0..m-1 differ between an m-row call and one-row calls (m <= 32), and
   between an m-row call and 2-row calls (m <= 2,048).
2. Whole model, plain verifier (invariant=False) and batch-invariant one: greedy AR for
   40 tokens after prompts of 300..1500 tokens of fastcoder/decode.py, then the same
   tokens verified as chains of 4/8/16/32 rows: how many rows' logits differ from the
   AR step's (bit for bit) and how many argmaxes; and how many keys/values rows a
   prefill of prompt + those tokens leaves different from the ones the steps wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch


def chains_vs_ar(invariant: bool) -> None:
    from fastcoder.models import load_model
    from fastcoder.trie import DraftTree
    from fastcoder.verifier import KVState, Verifier
    from fastcoder_bench.probes.ar_reference import ar_logits

    loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
    src = Path(__file__).resolve().parents[3].joinpath("fastcoder", "decode.py").read_text()
    v = Verifier(loaded.model, invariant=invariant)
    rows = bad = bad_argmax = kv_rows = 0
    for ctx in (300, 505, 777, 1020, 1500):
        ids = loaded.tokenizer(src)["input_ids"][:ctx]
        kv, toks, ref = ar_logits(v, ids, 40)
        ref = [r.float() for r in ref]
        stepped = kv.cache.buf[..., : ctx + 40, :].clone()
        fresh = KVState()
        v.prefill(fresh, ids + toks[:40], reserve=256)
        kv_rows += int((fresh.cache.buf[..., : ctx + 40, :] != stepped).any(dim=(0, 1, 2, 3, 5)).sum())
        for b in (4, 8, 16, 32):
            kv.ids = list(ids)
            kv.cache.length = ctx
            pos = 0
            while pos + b <= 40:
                v.step(kv, toks[pos], DraftTree.chain(toks[pos + 1 : pos + b], "probe"))
                for j in range(b):
                    got = v.last_logits[j].float()
                    rows += 1
                    bad += not torch.equal(got, ref[pos + j])
                    bad_argmax += int(got.argmax()) != int(ref[pos + j].argmax())
                kv.ids = list(ids) + toks[: pos + b]  # the chain's rows hold these tokens' K/V
                kv.cache.length = len(kv.ids)
                pos += b
    print(f"invariant={invariant}: chains vs AR steps: {rows} rows, logits differ on {bad}, argmax on {bad_argmax}; "
          f"prefilled vs stepped keys/values: {kv_rows} of {5 * 40 + sum((300, 505, 777, 1020, 1500))} rows differ")


def linear_rows() -> None:
    from fastcoder.matmul import PackedLinear

    torch.manual_seed(0)
    for out_f, in_f, bias in [(896, 896, True), (128, 896, True), (4864, 896, False), (896, 4864, False), (151936, 896, False)]:
        lin = torch.nn.Linear(in_f, out_f, bias=bias).to(torch.bfloat16)
        packed = PackedLinear(lin, keep_weight=True)
        x = (torch.randn(2048, in_f) * 4).to(torch.bfloat16)
        one = torch.cat([packed(x[r : r + 1]) for r in range(32)])
        two = torch.cat([packed(x[r : r + 2]) for r in range(0, 2048, 2)])
        diffs = " ".join(f"m={m}: {int((packed(x[:m]) != one[:m]).sum())}" for m in (2, 4, 8, 16, 32))
        diffs2 = " ".join(f"m={m}: {int((packed(x[:m]) != two[:m]).sum())}" for m in (4, 8, 16, 32, 129, 2048))
        print(f"packed bf16 linear {out_f}x{in_f}: elements differing from one-row calls, {diffs}; from 2-row calls, {diffs2}")


if __name__ == "__main__":
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
    linear_rows()
    chains_vs_ar(False)
    chains_vs_ar(True)
