"""Tree rows against AR's step, bit for bit (the sixteenth session's probe).

    python docs/bench/exact-paths/probe_tree.py MODEL LINE SUITE_DIR/tasks.jsonl

AR's next tokens drafted as a tree with a decoy sibling at every level (decoy listed first
or after), each step from AR's own cache; counts the true-path rows (and the root) whose
logits differ from AR's. The figures in docs/BENCHMARKS.md were measured *before* the
depth-first layout (``Verifier.step``); with it, "decoy-after" puts the true path first and
its rows are exact.
"""
import json, sys, torch
from fastcoder.models.load import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
name = sys.argv[1]; line = int(sys.argv[2]); rep = sys.argv[3]
rec = json.loads(open(rep).readlines()[line])
ids = rec["prompt_ids"]
loaded = load_model(name, dtype="auto")
v = Verifier(loaded.model)
N = 40
kv = KVState(); first, _, _ = v.prefill(kv, ids, reserve=64)
toks, ref = [first], []
for _ in range(N):
    r = v.step(kv, toks[-1], DraftTree()); ref.append(v.last_logits[0].clone()); toks.append(r.bonus)
ctx = len(ids)
saved = kv.cache.buf.clone()
for depth in (3, 5, 7):
  for layout in ("decoy-first", "decoy-after"):
    nbad = 0; tot = 0; maxd = 0.0
    for pos in range(0, N - depth, depth):
        kv.truncate(ctx + pos); 
        with torch.inference_mode(): kv.cache.buf.copy_(saved)
        kv.cache.length = ctx + pos; kv.ids = ids + toks[:pos]
        tokens, parents, depths = [], [], []
        parent = -1; true_rows = []
        for k in range(1, depth + 1):
            decoy = (toks[pos + k] + 7) % 1900 + 4
            pair = [(decoy, False), (toks[pos + k], True)] if layout == "decoy-first" else [(toks[pos + k], True), (decoy, False)]
            nxt = None
            for tok, real in pair:
                tokens.append(tok); parents.append(parent); depths.append(k)
                if real: nxt = len(tokens) - 1; true_rows.append((nxt + 1, pos + k))
            parent = nxt
        tree = DraftTree(tokens, parents, depths, ["probe"] * len(tokens), [1.0] * len(tokens))
        v.step(kv, toks[pos], tree)
        rows = [(0, pos)] + true_rows
        for row, refi in rows:
            tot += 1
            if not torch.equal(v.last_logits[row], ref[refi]):
                nbad += 1; maxd = max(maxd, float((v.last_logits[row].float() - ref[refi].float()).abs().max()))
    print(f"depth {depth} {layout}: {nbad}/{tot} rows differ from AR, max |d| {maxd}", flush=True)
