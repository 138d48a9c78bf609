"""`fastcoder demo`: several functions of this repository, each regenerated from its
signature and docstring with AR and with FastCoder, side by side.

For every function: the tokens generated, AR's and FastCoder's decode ms/token, the
decode speedup, FastCoder's mean accepted length and whether the two outputs are
byte-identical; then the aggregate decode speedup over all of them. Where the
outputs differ, the first differing position, both tokens and AR's top-2 logit
margin there are printed. In float32, and in bfloat16 on the CPU (batch-invariant
steps), the outputs are byte-identical and a difference is a bug and says so; in
bfloat16 on CUDA two logits equal up to bf16's rounding (a tie) can flip a token.

The workspace (``--workspace``, default ``.``) is indexed as D_r with the lines being
generated masked out of it, as ``fastcoder generate`` does; D_c is the cached stdlib
datastore. AR and FastCoder alternate which runs first, function by function.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from fastcoder.errors import FastCoderError
from fastcoder_cli.commands.compare import BF16_NOTE, TIE_MARGIN, Difference, first_difference

# functions of this repository with a docstring and a body of a few lines
DEFAULT_TARGETS = (
    "fastcoder/drafters.py::resync",
    "fastcoder/trie.py::limit_depth",
    "fastcoder/ngram.py::extend",
    "fastcoder/source_weights.py::observe",
    "lsp_server/recall.py::typed_through",
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("demo", help="AR and FastCoder side by side on functions of this repository")
    p.add_argument("targets", nargs="*", metavar="FILE::FUNCTION",
                   help=f"functions to regenerate (default: {len(DEFAULT_TARGETS)} functions of this repository)")
    p.add_argument("--model", default=None, help="builtin name, HF folder, .gguf file or hub id")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--workspace", type=Path, default=Path("."), help="index this directory as D_r (default .)")
    p.add_argument("--no-common", action="store_true", help="run without D_c")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--max-prompt-tokens", type=int, default=2048)
    p.add_argument("--show", action="store_true", help="also print every generated body")
    p.set_defaults(func=run)
    return p


def _targets(specs: Sequence[str], workspace: Path) -> list[tuple[Path, str]]:
    out = []
    for spec in specs:
        file, sep, func = spec.rpartition("::")
        if not sep or not file or not func:
            raise FastCoderError(f"target {spec!r}: expected FILE::FUNCTION")
        path = Path(file)
        if not path.is_absolute() and not path.exists():
            path = workspace / path
        if not path.is_file():
            raise FastCoderError(f"target {spec!r}: no file {path}")
        out.append((path, func))
    return out


def run(args: argparse.Namespace) -> int:
    from fastcoder.config import DecodeConfig
    from fastcoder.drafters import Sources
    from fastcoder.engine import Engine
    from fastcoder.models import DEFAULT_MODEL, load_model
    from fastcoder.stops import body_end, indent_of
    from fastcoder_cli.commands.generate_cmd import body_span

    targets = _targets(args.targets or DEFAULT_TARGETS, args.workspace)
    jobs = []
    for path, func in targets:  # every target is checked before the model loads
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise FastCoderError(f"cannot read {path}: {exc}") from exc
        first, last = body_span(text, function=func)
        jobs.append((path, func, text, first, last))

    loaded = load_model(args.model or DEFAULT_MODEL, dtype=args.dtype, device=args.device)
    dtype = str(loaded.dtype).removeprefix("torch.")
    engine = Engine.from_loaded(loaded, record_margins=True)
    exact = "float32" in dtype or engine.verifier.invariant  # any difference from AR is then a bug
    tok = loaded.tokenizer
    sources = Sources()
    index = None
    if args.workspace is not None:
        from indexer import WorkspaceIndex

        index = WorkspaceIndex([args.workspace], tok)
        index.open()
        index.flush()
        sources.dr = index.source
    if not args.no_common:
        from indexer import ensure_common

        sources.dc = ensure_common(tok)
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=args.max_new_tokens)
    print(f"model {loaded.name}, {dtype} on {engine.device}; D_r: {args.workspace if index else 'none'}, "
          f"D_c: {'none' if args.no_common else 'stdlib'}")
    head = f"{'function':<44} {'tokens':>6} {'AR ms/tok':>9} {'FC ms/tok':>9} {'speedup':>7} {'accepted':>8}  identical to AR"
    print(head)
    print("-" * len(head))
    totals = {"ar": [0.0, 0], "fastcoder": [0.0, 0]}
    differences: list[tuple[str, Difference]] = []
    warmed = False
    for n, (path, func, text, first, last) in enumerate(jobs):
        lines = text.splitlines(keepends=True)
        prefix = "".join(lines[: first - 1])
        masked = prefix + "".join(lines[last:])
        if index is not None:
            index.update_buffer(path.resolve(), masked)  # no leakage of the lines we generate
            index.flush()
        prompt = engine.encode(prefix)[-args.max_prompt_tokens :]
        stop = body_end(indent_of(lines[first - 1]))
        if not warmed:
            for m in ("ar", "fastcoder"):
                engine.generate(prompt[-64:], cfg.replace(method=m, max_new_tokens=4), sources=sources)
            warmed = True
        runs = {}
        for m in (("ar", "fastcoder") if n % 2 == 0 else ("fastcoder", "ar")):
            runs[m] = engine.generate(prompt, cfg.replace(method=m), sources=sources if m != "ar" else None, stop_fn=stop)
        if index is not None:
            index.update_buffer(path.resolve(), text)
        ar, fc = runs["ar"], runs["fastcoder"]
        for m, g in runs.items():
            totals[m][0] += g.stats.decode_s
            totals[m][1] += max(g.stats.new_tokens - 1, 0)
        diff = first_difference(tok, ar.tokens, fc.tokens, ar.margins)
        name = f"{_short(path, args.workspace)}::{func}"
        if diff is None and ar.text == fc.text:
            same = "yes"
        else:
            diff = diff or Difference(len(ar.tokens), "<text>", "<text>", None)
            differences.append((name, diff))
            tie = diff.ar_margin is not None and diff.ar_margin <= TIE_MARGIN and not exact
            same = f"no: {'bf16 tie' if tie else 'DIFFERS'} at token {diff.index} (margin " + (
                "?" if diff.ar_margin is None else f"{diff.ar_margin:.3f}") + ")"
        speed = ar.stats.ms_per_token / max(fc.stats.ms_per_token, 1e-9)
        print(f"{name[-44:]:<44} {len(fc.tokens):>6} {ar.stats.ms_per_token:>9.1f} {fc.stats.ms_per_token:>9.1f} "
              f"{speed:>6.2f}x {fc.stats.mean_accept_len:>8.2f}  {same}", flush=True)
        if args.show:
            print(f"--- AR\n{ar.text}\n--- FastCoder\n{fc.text}\n---")
    if index is not None:
        index.stop(save=False)
    print("-" * len(head))
    ar_ms = 1000 * totals["ar"][0] / max(totals["ar"][1], 1)
    fc_ms = 1000 * totals["fastcoder"][0] / max(totals["fastcoder"][1], 1)
    print(f"aggregate decode speedup vs AR: {ar_ms / max(fc_ms, 1e-9):.2f}x  (AR {ar_ms:.1f} ms/token, FastCoder "
          f"{fc_ms:.1f} ms/token over {totals['fastcoder'][1]} decoded tokens of {len(jobs)} functions)")
    same_n = len(jobs) - len(differences)
    print(f"byte-identical to AR: {same_n} of {len(jobs)} functions")
    for name, diff in differences:
        print(f"  {name}: {diff.describe(dtype, exact)}")
    if differences and not exact:
        print(BF16_NOTE)
    return 0


def _short(path: Path, root: Path | None) -> str:
    try:
        return str(path.resolve().relative_to((root or Path(".")).resolve()))
    except ValueError:
        return str(path)
