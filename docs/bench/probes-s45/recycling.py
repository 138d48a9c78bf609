"""Would the model's own top-k, recycled, draft better? (forty-fifth session)

Token Recycling (Luo et al., 2024, "Turning Trash into Treasure"): keep, for every token,
the top-k next tokens the model predicted at the last row whose input was that token
(every verified row counts, rejected ones too), and draft a tree from that table by
following it from the root. Here, on real suite generations (FastCoder, the suite's
engine and sources, tasks in order, one table for the whole run as a server keeps one),
each step's rows update the table after the step, and before the step the table's trees
are built and scored exactly against the output the generation then produced (greedy
output is fixed: a draft path is accepted iff it is that output's continuation).

Per step: FastCoder's real accepted tokens; each recycled tree's; the better of the two
(what one merged trie would accept, both verified in one step). Then an estimate of
tokens per step and of the step cost from the run's own cost curve (rows of the merged
tree, at the step's context).

    python docs/bench/probes-s45/recycling.py [TASKS] [MAX_NEW] [K]
"""
import os
import sys
from collections import defaultdict

import torch

from fastcoder.verifier import Verifier
from fastcoder_bench.probes.inputs import suite_harness

n_tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 10
max_new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
K = int(sys.argv[3]) if len(sys.argv) > 3 else 8
# FastCoder as it drafted before the recycle source (the table here is the probe's own)
engine, h, tasks, curve = suite_harness(["fastcoder-no-recycle"], n_tasks, max_new)
variants = list(h.variants)

adj: dict[int, list[int]] = {}  # token -> the top-K next tokens at its latest row (one table for the run)
by_group: dict[str, dict[int, list[int]]] = {}  # the same, one table per project (the suite's sessions)
# tree shapes: children per depth (1st depth: the root's top-a, ...), each child's top-b ...
SHAPES = {"chain8": [1] * 8, "w3x1": [3, 1, 1, 1, 1, 1], "w4-2-1": [4, 2, 1, 1, 1, 1], "w8-2-2-1": [8, 2, 2, 1, 1, 1, 1]}


def tree_paths(root: int, shape: list[int], table=None) -> list[list[int]]:
    """Every root-to-leaf path of the recycled tree (nodes = sum of the path prefixes)."""
    table = adj if table is None else table
    paths = [[]]
    out = []
    for width in shape:
        nxt = []
        for p in paths:
            last = p[-1] if p else root
            for t in table.get(last, [])[:width]:
                nxt.append(p + [t])
        if not nxt:
            break
        out.extend(nxt)
        paths = nxt
    return out


def nodes_of(paths):
    return len({tuple(p) for p in paths})


def accepted(paths, cont):
    best = 0
    for p in paths:
        n = 0
        while n < len(p) and n < len(cont) and p[n] == cont[n]:
            n += 1
        best = max(best, n)
    return best


steps = []  # (task, past, root, real_nodes, hyp {shape: (paths)})
orig = Verifier.step
state = {"task": None, "group": None}


def step(self, kv, root, tree, *, forced=(), allowed=None, stop=None, topk=0):
    past = len(kv.ids)
    own = by_group.setdefault(state["group"], {})
    hyp = None
    if not forced:
        hyp = {name: tree_paths(int(root), shape) for name, shape in SHAPES.items()}
        hyp.update({name + "/project": tree_paths(int(root), shape, own) for name, shape in SHAPES.items()})
    res = orig(self, kv, root, tree, forced=forced, allowed=allowed, stop=stop, topk=topk)
    logits = self.last_logits  # rows: root, node 0..n-1 (tree order)
    if logits is not None and logits.shape[0] == len(tree) + 1:
        top = torch.topk(logits.float(), K, dim=-1).indices.tolist()
        inputs = [int(forced[-1]) if forced else int(root)] + list(tree.tokens)
        for tok, row in zip(inputs, top):
            adj[tok] = row
            own[tok] = row
    real_paths = []
    ch = tree.children()
    # the real tree's paths, for the merged figure
    for i in range(len(tree)):
        p, j = [], i
        while j >= 0:
            p.append(tree.tokens[j])
            j = tree.parents[j]
        real_paths.append(p[::-1])
    steps.append((state["task"], past, int(root), len(tree), res.accepted, hyp, real_paths))
    return res


Verifier.step = step
seqs = {}
for i, task in enumerate(tasks):
    state["task"], state["group"] = i, task.group
    ids = h.prompt_ids(task)
    dr = h.dr_for(task)
    v = variants[0]
    s = h.session_for(v, task)
    g = engine.generate(ids, v.config, session=s, sources=h.sources(v, dr), stop_fn=task.stop_fn())
    s.kv.reset()
    seqs[i] = list(ids) + list(g.tokens)
    print(f"task {i}: {g.stats.new_tokens} tokens, {g.stats.forward_steps} steps, accept len {g.stats.mean_accept_len:.2f}; "
          f"table {len(adj)} tokens; load {os.getloadavg()[0]:.2f}", flush=True)

cost = lambda rows, ctx: curve.cost(rows - 1, ctx) if hasattr(curve, "cost") else None  # noqa: E731
tot = defaultdict(float)
n = 0
for t, past, root, real_n, acc, hyp, real_paths in steps:
    seq = seqs[t]
    if hyp is None or past >= len(seq) or seq[past] != root:
        continue
    cont = seq[past + 1 :]
    n += 1
    real = len(acc)
    tot["real"] += real + 1
    tot["real_nodes"] += real_n
    for name, paths in hyp.items():
        a = accepted(paths, cont)
        tot[name] += a + 1
        merged = max(a, real)
        tot[name + "+real"] += merged + 1
        merged_nodes = len({tuple(p) for p in paths} | {tuple(p) for p in real_paths})
        tot[name + "+real_nodes"] += merged_nodes
        tot[name + "_nodes"] += nodes_of(paths)
import pickle

pickle.dump({"steps": steps, "seqs": seqs}, open(os.environ.get("RECYCLE_DUMP", "/tmp/recycling-steps.pkl"), "wb"))
# chain-only verifiers (CPU bf16, exact paths) verify one chain: the real one or the
# recycled top-1 chain. When do they agree at depth 1, and who is right when not?
agree = disagree_real = disagree_rec = disagree_none = rec_only = 0
for t, past, root, real_n, acc, hyp, real_paths in steps:
    seq = seqs[t]
    if hyp is None or past >= len(seq) or seq[past] != root:
        continue
    nxt = seq[past + 1] if past + 1 < len(seq) else None
    real_first = real_paths[0][0] if real_paths else None
    rec_first = hyp["chain8"][0][0] if hyp["chain8"] else None
    if real_first is None:
        rec_only += rec_first == nxt
    elif real_first == rec_first:
        agree += 1
    elif rec_first is not None:
        disagree_real += real_first == nxt
        disagree_rec += rec_first == nxt
        disagree_none += real_first != nxt and rec_first != nxt
print(f"depth 1: real and recycled top-1 agree {agree}; disagree: real right {disagree_real}, recycled right "
      f"{disagree_rec}, neither {disagree_none}; no real draft, recycled right {rec_only}")
print(f"\n{n} steps scored (tokens per step = accepted + 1; nodes = draft nodes per step)")
print(f"real FastCoder: {tot['real'] / n:.3f} tokens/step, {tot['real_nodes'] / n:.1f} nodes")
for name in list(SHAPES) + [n + "/project" for n in SHAPES]:
    print(f"{name:10s} alone {tot[name] / n:.3f} ({tot[name + '_nodes'] / n:.1f} nodes); merged with the real tree "
          f"{tot[name + '+real'] / n:.3f} ({tot[name + '+real_nodes'] / n:.1f} nodes)")
print("curve", {nn: [round(1e3 * s, 1) for s in secs] for nn, secs in {curve.context_len: curve.seconds, **curve.by_length}.items()}, curve.ks)
