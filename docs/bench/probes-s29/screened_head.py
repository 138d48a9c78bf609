"""Twenty-ninth session: an exact argmax over the 151,936-row head screened by cheaper logits (int4 groups
of 32, or int8 per row) with an error bound, exact logits for the candidates only; the bound, the
candidates it leaves and the kernels' times at 1-16 rows, on real hidden states (httpx)::

    python docs/bench/probes-s29/screened_head.py
"""
import glob, time, statistics, torch
from fastcoder.models import load_model
lm = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
model, tok = lm.model, lm.tokenizer
head = model.lm_head
W = head.weight.detach().contiguous()  # [V, 896] bf16
V, K = W.shape
print("head", V, K, type(head).__name__)
GS = 32
def quant4(w, gs):
    N, K = w.shape
    wf = w.float().reshape(N, K // gs, gs)
    mn = wf.amin(-1, keepdim=True); mx = wf.amax(-1, keepdim=True)
    scale = ((mx - mn) / 15).clamp(min=1e-10)
    q = ((wf - mn) / scale).round().clamp(0, 15)
    zero = mn + 8 * scale
    sz = torch.stack([scale.squeeze(-1).t(), zero.squeeze(-1).t()], -1).to(torch.bfloat16).contiguous()
    deq = (q - 8) * sz[..., 0].t().float().unsqueeze(-1) + sz[..., 1].t().float().unsqueeze(-1)
    err = (deq - wf).abs().amax(-1)  # [N, G] max error per group, with the bf16 scale/zero
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).reshape(N, K), 1), sz, err, deq.reshape(N, K)
t0 = time.time(); p4, sz4, err4, deq4 = quant4(W, GS); print(f"quantized in {time.time()-t0:.1f}s")
gerr = err4.amax(0)  # [G] worst error per group over the vocabulary
# int8 per-channel
s8 = (W.float().abs().amax(1) / 127).clamp(min=1e-10)
q8 = (W.float() / s8[:, None]).round().clamp(-127, 127).to(torch.int8)
err8 = (q8.float() * s8[:, None] - W.float()).abs().amax(1)
# hidden states from real code
files = sorted(glob.glob("/root/.cache/fastcoder/bench/src/httpx-0.28.1/httpx/*.py"))[:4]
hs = []
with torch.inference_mode():
    for f in files:
        ids = tok(open(f).read(), return_tensors="pt").input_ids[:, :768]
        out = model.model(ids)
        hs.append(out.last_hidden_state[0])
H = torch.cat(hs)  # [T, 896] bf16
print("hidden rows", H.shape[0])
ncand4, ncand8, miss4, miss8 = [], [], 0, 0
with torch.inference_mode():
    exact = (H.float() @ W.float().t())  # fp32 reference logits
    a4 = torch.ops.aten._weight_int4pack_mm_for_cpu(H, p4, GS, sz4).float()
    a8 = torch.ops.aten._weight_int8pack_mm(H, q8, s8.to(torch.bfloat16)).float()
    d4 = (a4 - exact).abs().amax(1); d8 = (a8 - exact).abs().amax(1)
    hg = H.float().abs().reshape(-1, K // GS, GS).sum(-1)  # [T, G] ||h_g||_1
    B4 = (hg * gerr).sum(1) + 2**-7 * a4.abs().amax(1) + 1e-3  # quantization + bf16 output rounding + slack
    B8 = H.float().abs().sum(1) * err8.max() + 2**-7 * a8.abs().amax(1) + 1e-3
    for name, a, B, d in (("int4", a4, B4, d4), ("int8", a8, B8, d8)):
        thr = a.amax(1) - 2 * B
        cand = (a >= thr[:, None]).sum(1).float()
        ok = (exact.argmax(1) == exact.gather(1, torch.where(a >= thr[:, None], exact, torch.full_like(exact, -1e9)).argmax(1, keepdim=True)).squeeze(1).new_tensor(0) + exact.argmax(1)).all()
        viol = (d > B).sum().item()
        print(f"{name}: bound B median {B.median():.3f} max {B.max():.3f}; actual max err median {d.median():.3f} max {d.max():.3f}; bound violated on {viol} rows; candidates median {cand.median():.0f} p90 {cand.quantile(0.9):.0f} max {cand.max():.0f}")
    def t(f, reps=20):
        for _ in range(3): f()
        ts = []
        for _ in range(reps):
            a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
        return statistics.median(ts) * 1e3
    for M in (1, 4, 8, 16):
        x = H[:M].contiguous().unsqueeze(0)
        tb = t(lambda: head(x))
        t4 = t(lambda: torch.ops.aten._weight_int4pack_mm_for_cpu(x[0], p4, GS, sz4))
        t8 = t(lambda: torch.ops.aten._weight_int8pack_mm(x[0], q8, s8.to(torch.bfloat16)))
        # invariance of the screen: row 0 alone vs among M
        inv4 = torch.equal(torch.ops.aten._weight_int4pack_mm_for_cpu(x[0][:1], p4, GS, sz4)[0], torch.ops.aten._weight_int4pack_mm_for_cpu(x[0], p4, GS, sz4)[0])
        print(f"M={M}: bf16 packed head {tb:.2f} ms, int4 {t4:.2f} ms, int8 {t8:.2f} ms; int4 row-invariant {inv4}")
    cidx = torch.arange(0, V, V // 2000)[:2000]
    hrow = H[:1].float()
    tc = t(lambda: (W.index_select(0, cidx).float() * hrow).sum(-1))
    print(f"exact logits for 2000 candidates: {tc:.3f} ms")
