"""Replay the typing script of long bodies through the server's prompt builder (no
model) and count what each new prompt leaves to prefill: without a spare cache (only
the previous prompt is cached) and with the planned window prefilled in the spare cache
(as the server does in idle time when ``prepareWindow`` is on: the ids it would put
there after each prompt, assumed complete before the next one).

    python docs/bench/window-s19/window_probe.py FILES MIN_CHARS MAX_CHARS
"""
import random
import sys

from fastcoder.models import detect_fim, load_tokenizer
from fastcoder.tokens import TokenInfo
from fastcoder_bench.replay import keystrokes, suite_tasks
from lsp_server.prompt import CursorContext, build_prompt, encode, plan_start


def common(a, b):
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


tok = load_tokenizer("qwen2.5-coder-0.5b", progress=False)
fim = detect_fim(tok)
info = TokenInfo.for_tokenizer(tok)
fim_prefix = tok.convert_tokens_to_ids(fim.prefix)
n, lo, hi = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
totals = {}
for task in suite_tasks(n, None, lo, hi, 1):
    script = keystrokes(task.body, random.Random(0), autoclose=True)
    for prepare in (False, True):
        typed, right, anchor, sticky, planned = 0, "", None, None, None
        cached, spare = [], []
        moves, big, prefilled, at_moves, idle, window = 0, [], 0, [], 0, []
        for i, k in enumerate([None] + script):
            if k is not None:
                typed += len(k.typed)
                right = k.right
            ctx = CursorContext(task.before + task.body[:typed], right + task.after)
            p = build_prompt(tok, fim, ctx, 2048, suffix_share=0.25, max_suffix_tokens=128, sticky_start=sticky,
                             layout="anchored", anchor=anchor, info=info, headroom=True,
                             planned_start=planned if prepare else None)
            if i > 0:  # the first prompt is a cold prefill in both
                need = len(p.ids) - max(common(cached, p.ids), common(spare, p.ids))
                prefilled += need
                moved = p.prefix_start != sticky
                if moved:
                    moves += 1
                    at_moves.append(need)
                if need > 300:
                    big.append((typed, need, "MOVE" if moved else ""))
            window.append(p.prefix_tokens)
            if common(spare, p.ids) > common(cached, p.ids):
                cached, spare = spare, cached
            cached = list(p.ids)
            anchor, sticky = p.anchor, p.prefix_start
            if prepare:
                planned = plan_start(tok, ctx.prefix, p, planned)
                if planned is not None:
                    head = ctx.prefix[: ctx.prefix.rfind("\n") + 1]
                    new = [fim_prefix] + encode(tok, head[planned:])
                    idle += len(new) - common(spare, new)
                    spare = new
        name = "planned" if prepare else "before"
        print(f"{task.path.name} ({name}): {len(task.body)} chars, {len(script)} keys, start moves {moves}, "
              f"tokens prefilled at the moves {at_moves}, after the first prompt {prefilled}, "
              f"prompts prefilling > 300 tokens {big}, idle prefill {idle}, "
              f"prefix tokens mean {sum(window) / len(window):.0f} min {min(window)}")
        t = totals.setdefault(name, [0, 0, 0, 0, 0, 0])
        t[0] += moves
        t[1] += sum(at_moves)
        t[2] += prefilled
        t[3] += idle
        t[4] += sum(window)
        t[5] += len(window)
for name, (m, a, p, i, w, c) in totals.items():
    print(f"{name}: start moves {m}, tokens prefilled at them {a}, tokens prefilled after the first prompts {p}, "
          f"idle prefill {i}, prefix tokens mean {w / c:.0f}")
