"""The host's share of an editor generation, AR against FastCoder, with no model: what a
GPU, whose steps cost ~4 ms, pays on top of its forwards.

    python -m fastcoder_bench.probes.host_overhead [FILE] [--keys 150] [--out-tokens 10]
        [--curve RUN_JSON] [--pool] [--no-gate] [--profile]

Retypes FILE from a third of the way in, one character at a time, as the typing replay does
(the text after the cursor unchanged, a sticky window start). At each keystroke both
methods generate through the real decode loop (:func:`fastcoder.decode.generate`) with the
server's decode configuration, each in its own document session as the server keeps one, and
the sources the server gives (the text after the cursor as the reference, D_c, and D_r of
FILE's folder whose delta holds the typed buffer); the model is a :class:`fastcoder.replay.ReplayVerifier` whose output is the
next ``--out-tokens`` tokens the user is about to type, so nothing but host work is timed.
Methods alternate order per keystroke. Prints per method the median and mean milliseconds
per generation and per step, the steps, and the share of the time in drafting."""

from __future__ import annotations

import argparse
import cProfile
from concurrent.futures import ThreadPoolExecutor
import json
import pstats
import statistics
import time
from pathlib import Path

from fastcoder.budget import CostCurve
from fastcoder.decode import _eos_ids, generate
from fastcoder.drafters import Sources, make_drafter
from fastcoder.models import tokenizer_fingerprint
from fastcoder.replay import ReplayVerifier
from fastcoder.session import Session
from fastcoder.tokens import TokenInfo
from fastcoder_bench.suite.simulate import _NoModel
from indexer.common import ensure_common
from indexer.repo_store import RepoIndex
from indexer.scan import read_source
from indexer.tokenizing import load_tokenizer
from lsp_server.settings import ServerSettings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).resolve().parents[2]
    ap.add_argument("file", type=Path, nargs="?", default=here / "lsp_server" / "complete.py")
    ap.add_argument("--keys", type=int, default=150)
    ap.add_argument("--out-tokens", type=int, default=10)
    ap.add_argument("--curve", type=Path, help="a bench run.json whose cost curve the budget uses (default: none, no trimming)")
    ap.add_argument("--profile", action="store_true", help="cProfile FastCoder's generations")
    ap.add_argument("--pool", action="store_true", help="also FastCoder searching its datastores in the engine's search pool")
    ap.add_argument("--no-gate", action="store_true", help="also FastCoder asking every source at every draft (no source gate)")
    args = ap.parse_args()
    curve = CostCurve.from_json(json.loads(args.curve.read_text())["machine"]["cost_curve"]) if args.curve else None
    prof = cProfile.Profile() if args.profile else None
    tok = load_tokenizer("qwen2.5-coder-0.5b", progress=False)
    fp = tokenizer_fingerprint(tok)
    dc = ensure_common(tok, progress=False, fingerprint=fp)
    ids = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    text = args.file.read_text()
    # D_r as the server keeps it: the folder's files in a base, the typed file's buffer in
    # the delta (re-indexed at each keystroke, its disk version tombstoned)
    dr = RepoIndex(tok, fingerprint=fp, background_merge=False)
    dr.build([(p, read_source(p)) for p in sorted(args.file.parent.glob("*.py"))])
    fim = [tok.convert_tokens_to_ids(t) for t in ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")]
    eos = sorted(_eos_ids(tok, _NoModel()))[0]
    settings = ServerSettings()
    configs = {m: settings.decode_config(method=m, time_budget_s=None) for m in ("ar", "fastcoder")}
    if args.pool:  # the same FastCoder, its datastore searches in the engine's pool (the server's way)
        configs["fastcoder+pool"] = configs["fastcoder"]
    if args.no_gate:
        configs["fastcoder-no-gate"] = configs["fastcoder"].replace(source_gate=False)
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="fastcoder-search")  # as the engine's
    sessions = {m: Session(c) for m, c in configs.items()}
    TokenInfo.for_tokenizer(tok)  # built once per tokenizer (the server's warm-up does it)
    at = len(text) // 3
    after = text[at + args.keys : at + args.keys + 2000]
    suffix = ids(after)
    per_gen = {m: [] for m in configs}
    per_step = {m: [] for m in configs}
    drafting = {m: 0.0 for m in configs}
    steps = {m: 0 for m in configs}
    for i in range(args.keys):
        cursor = at + i
        prompt = [fim[0]] + ids(text[max(0, at - 6000) : cursor]) + [fim[1]] + suffix + [fim[2]]
        out = ids(text[cursor : cursor + 200])[: args.out_tokens]
        dr.update_file(args.file, text[:cursor] + text[at + args.keys :])  # the buffer as typed so far
        methods = list(configs)
        for m in (methods if i % 2 else methods[::-1]):
            cfg = configs[m]
            verifier = ReplayVerifier(out, eos, max_nodes=127)
            drafter = make_drafter(cfg, Sources(dr=dr, dc=dc), reference=suffix, pool=pool if m.endswith("+pool") else None)
            if prof is not None and m != "ar":
                prof.enable()
            t0 = time.perf_counter()
            gen = generate(verifier, tok, drafter, prompt, cfg, session=sessions[m], cost_curve=curve if m != "ar" else None)
            dt = time.perf_counter() - t0
            if prof is not None:
                prof.disable()
            per_gen[m].append(dt)
            per_step[m].append(dt / max(1, gen.stats.forward_steps))
            drafting[m] += gen.stats.retrieval_s + gen.stats.tree_s
            steps[m] += gen.stats.forward_steps
    for m in configs:
        g = per_gen[m]
        print(f"{m:14s}: per generation median {1000 * statistics.median(g):.2f} ms, mean {1000 * statistics.mean(g):.2f} ms; "
              f"per step median {1000 * statistics.median(per_step[m]):.2f} ms; drafting {100 * drafting[m] / sum(g):.0f}% "
              f"({len(g)} generations of {args.out_tokens} tokens, {steps[m] / len(g):.2f} steps each)"
              + (f"; sources dropped at the end: {', '.join(sorted(sessions[m].gate.dropped)) or 'none'}" if configs[m].source_gate and m != "ar" else ""))
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
