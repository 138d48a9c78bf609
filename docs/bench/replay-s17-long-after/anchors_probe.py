"""Replay the typing script through the server's prompt builder (no model): when is a
new anchor set, and when does the prefix start move?"""
import random, sys
from fastcoder.models import load_tokenizer, detect_fim
from fastcoder.tokens import TokenInfo
from fastcoder_bench.replay import suite_tasks, keystrokes
from lsp_server.prompt import CursorContext, build_prompt

tok = load_tokenizer("qwen2.5-coder-0.5b", progress=False)
fim = detect_fim(tok)
info = TokenInfo.for_tokenizer(tok)
n, lo, hi = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]); HEAD = len(sys.argv) > 4
for task in suite_tasks(n, None, lo, hi, 1):
    script = keystrokes(task.body, random.Random(0), autoclose=True)
    typed, right, anchor, sticky = 0, "", None, None
    moves = anchors = 0
    full = []
    for i, k in enumerate([None] + script):
        if k is not None:
            typed += len(k.typed); right = k.right
        ctx = CursorContext(task.before + task.body[:typed], right + task.after)
        p = build_prompt(tok, fim, ctx, 2048, suffix_share=0.25, max_suffix_tokens=128, sticky_start=sticky,
                         layout="anchored", anchor=anchor, info=info, headroom=HEAD)
        if p.anchor is not anchor:
            anchors += 1
            why = "first" if anchor is None else ("line-head" if not ctx.prefix.startswith(anchor.head) else "reserve/suffix")
            moved = sticky is not None and p.prefix_start != sticky
            if moved: moves += 1
            full.append((typed, why, "MOVE" if moved else "", len(p.ids), p.prefix_tokens, p.suffix_tokens))
        anchor, sticky = p.anchor, p.prefix_start
    print(f"{task.path.name}: {len(task.body)} chars, {len(script)} keys, new anchors {anchors}, start moves {moves}")
    for f in full: print("   ", f)
