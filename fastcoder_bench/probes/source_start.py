"""What starting FastCoder's in-memory sources costs per generation while a user types:
the live context's n-gram index (prompt + output) and the reference's (the code after
the cursor), built afresh each time vs kept in the document's session.

    python -m fastcoder_bench.probes.source_start [FILE] [keystrokes]

Retypes FILE from a third of the way in, one character at a time (a FIM prompt of the text before and
after the cursor, about 1,500 + 500 tokens as the server cuts it); after each keystroke
both ways start the sources on the same prompt (order alternating), and their drafts for
that prompt are compared (they must be equal). Prints the median and mean milliseconds."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path


from fastcoder.config import DecodeConfig
from fastcoder.session import DraftState, Session
from fastcoder.sources.builtin import Context, Reference
from fastcoder.stats import GenStats
from indexer.tokenizing import load_tokenizer


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "lsp_server" / "complete.py"
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    tok = load_tokenizer("qwen2.5-coder-0.5b", progress=False)
    text = path.read_text()
    cfg = DecodeConfig(method="fastcoder")
    ids = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    fp, fs, fm = (tok.convert_tokens_to_ids(t) for t in ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"))
    kept = Session(cfg)
    times = {"fresh": [], "kept": []}
    at = len(text) // 3
    for i in range(keys):
        cursor = at + i
        # the text from ``at`` on is retyped: before the cursor what is typed so far (a
        # sticky window start), after it the rest of the file, unchanged while typing
        before, after = text[max(0, at - 6000) : cursor], text[at + keys : at + keys + 2000]
        suffix = ids(after)
        prompt = [fp] + ids(before) + [fs] + suffix + [fm]
        drafts = {}
        for way in (("fresh", "kept") if i % 2 else ("kept", "fresh")):
            ses = kept if way == "kept" else Session(cfg)
            st = DraftState(list(prompt), len(prompt), cfg, ses, GenStats(method="fastcoder"))
            ctx, ref = Context(), Reference(suffix)
            t0 = time.perf_counter()
            ctx.start(st)
            ref.start(st)
            times[way].append(time.perf_counter() - t0)
            drafts[way] = (ctx.propose(st, 64), ref.propose(st, 64))
            out = suffix[:8]  # a generation's output extends the live context, as update() does
            st.tokens.extend(out)
            ctx.update(st, None, [], out)
        assert drafts["fresh"][0].nodes == drafts["kept"][0].nodes and drafts["fresh"][1].nodes == drafts["kept"][1].nodes
    for way, ts in times.items():
        print(f"{way:5s}: start of the context + reference sources, median {1000 * statistics.median(ts):.2f} ms, "
              f"mean {1000 * statistics.mean(ts):.2f} ms over {len(ts)} keystrokes (prompt ~{len(prompt)} tokens)")


if __name__ == "__main__":
    main()
