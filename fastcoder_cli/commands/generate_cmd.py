"""`fastcoder generate FILE (--line L | --function NAME)`: one generation, with stats.

The prompt is the file text before line L (the first body line of the function with
``--function``), left-truncated to ``--max-prompt-tokens``. Generation stops where
the block that starts at line L ends (a dedent) or at ``--max-new-tokens``. With
``--workspace DIR`` the workspace is indexed as D_r, with the lines being generated
masked out of it (otherwise D_r would hold the answer). D_c is the cached stdlib
datastore unless ``--common PATH`` or ``--no-common``.

``--compare-ar`` also runs plain greedy decoding and prints whether the outputs are
identical (and where they differ: the position, both tokens and AR's top-2 logit
margin there, a bf16 tie or not) and the decode speedup. ``fastcoder demo`` does the
same for several functions.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from fastcoder.config import METHODS, DecodeConfig
from fastcoder.errors import FastCoderError
from fastcoder.stops import body_end, indent_of


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("generate", help="generate code at a line of a file and print it with stats")
    p.add_argument("file", type=Path)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--line", type=int, help="1-based line where generation starts")
    where.add_argument("--function", help="regenerate the body of this function (after its docstring)")
    p.add_argument("--method", default="fastcoder", choices=[m for m in METHODS if m != "reuse"])
    p.add_argument("--model", default=None, help="builtin name, HF folder, .gguf file or hub id")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--workspace", type=Path, help="index this directory as D_r")
    p.add_argument("--common", type=Path, help="D_c datastore file (default: the cached stdlib one)")
    p.add_argument("--no-common", action="store_true", help="run without D_c")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--max-prompt-tokens", type=int, default=2048)
    p.add_argument("--max-draft-tokens", type=int, default=None, help="fixed tree size (default: from the cost curve)")
    p.add_argument("--compare-ar", action="store_true", help="also run AR; print identity and speedup")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=run)
    return p


def body_span(text: str, *, line: int | None = None, function: str | None = None) -> tuple[int, int]:
    """(first, last) 1-based lines of the code to generate.

    ``function``: the body of that function after its docstring (the first match in
    the file, methods included). ``line``: from that line to the end of its block.
    """
    lines = text.splitlines()
    if function is not None:
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            raise FastCoderError(f"cannot parse the file to find {function!r}: {exc}") from exc
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                    body = body[1:]
                if not body:
                    raise FastCoderError(f"function {function!r} has no body after its docstring")
                return body[0].lineno, node.end_lineno or body[-1].end_lineno
        raise FastCoderError(f"no function named {function!r} in the file")
    assert line is not None
    if not 1 <= line <= len(lines):
        raise FastCoderError(f"--line {line} is outside the file (1..{len(lines)})")
    indent = indent_of(lines[line - 1])
    end = line
    for i in range(line, len(lines)):
        if lines[i].strip() and indent_of(lines[i]) < indent:
            break
        if lines[i].strip():
            end = i + 1
    return line, end


def run(args: argparse.Namespace) -> int:
    from fastcoder.drafters import Sources
    from fastcoder.engine import Engine
    from fastcoder.models import DEFAULT_MODEL, load_model

    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FastCoderError(f"cannot read {path}: {exc}") from exc
    first, last = body_span(text, line=args.line, function=args.function)
    lines = text.splitlines(keepends=True)
    prefix = "".join(lines[: first - 1])
    expected = "".join(lines[first - 1 : last])
    masked = prefix + "".join(lines[last:])

    loaded = load_model(args.model or DEFAULT_MODEL, dtype=args.dtype, device=args.device)
    engine = Engine.from_loaded(loaded, record_margins=args.compare_ar)
    tok = loaded.tokenizer
    prompt = engine.encode(prefix)[-args.max_prompt_tokens :]

    sources = Sources()
    index = None
    if args.workspace is not None:
        from indexer import WorkspaceIndex

        index = WorkspaceIndex([args.workspace], tok)
        index.open()
        index.update_buffer(path.resolve(), masked)  # no leakage of the lines we generate
        index.flush()
        sources.dr = index.source
    if not args.no_common:
        from indexer import ensure_common, load_common

        sources.dc = load_common(args.common, tok) if args.common else ensure_common(tok)

    stop = body_end(indent_of(lines[first - 1]))
    cfg = DecodeConfig(method=args.method, max_new_tokens=args.max_new_tokens, max_draft_tokens=args.max_draft_tokens)
    engine.generate(prompt[-64:], cfg.replace(max_new_tokens=4), sources=sources)  # warm-up
    gen = engine.generate(prompt, cfg, sources=sources, stop_fn=stop)
    result: dict = {"text": gen.text, "stats": gen.stats.to_dict(), "expected": expected}
    ar = None
    diff = None
    if args.compare_ar:
        from fastcoder_cli.commands.compare import first_difference

        ar = engine.generate(prompt, cfg.replace(method="ar"), stop_fn=stop)
        diff = first_difference(tok, ar.tokens, gen.tokens, ar.margins)
        result.update(
            ar_text=ar.text,
            identical_to_ar=ar.tokens == gen.tokens,
            first_difference=None if diff is None else diff.__dict__,
            speedup_vs_ar=ar.stats.ms_per_token / max(gen.stats.ms_per_token, 1e-9),
            e2e_speedup_vs_ar=ar.stats.total_s / max(gen.stats.total_s, 1e-9),
        )
    if index is not None:
        index.stop(save=False)
    if args.json:
        json.dump(result, sys.stdout)
        print()
        return 0
    out = sys.stdout
    print(f"--- {args.method} ({loaded.name}, {loaded.dtype}) ---", file=out)
    print(gen.text, file=out)
    print(f"--- stats: {gen.stats.summary()}", file=out)
    if ar is not None:
        print("--- ar ---", file=out)
        print(ar.text, file=out)
        print(f"--- stats: {ar.stats.summary()}", file=out)
        from fastcoder_cli.commands.compare import BF16_NOTE

        dtype = str(loaded.dtype).removeprefix("torch.")
        exact = "float32" in dtype or engine.verifier.invariant
        same = "yes" if diff is None else f"no, {diff.describe(dtype, exact)}"
        print(
            f"identical to AR: {same}   decode speedup vs AR: {result['speedup_vs_ar']:.2f}x   "
            f"end-to-end speedup: {result['e2e_speedup_vs_ar']:.2f}x   mean accepted length: {gen.stats.mean_accept_len:.2f}",
            file=out,
        )
        if diff is not None and not exact:
            print(BF16_NOTE, file=out)
    return 0
