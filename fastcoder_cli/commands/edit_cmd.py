"""`fastcoder edit FILE --start-line A --end-line B --instruction TEXT`: edit lines A..B.

Prints the replacement for lines A..B (1-based, inclusive; the file is not changed).
Decoding uses the ``reuse`` method (EfficientEdit): the selected code is the draft,
verified in long chunks, so the unchanged parts cost almost nothing; the output is
exactly what plain greedy decoding gives.

``--compare-ar`` also runs plain greedy decoding (AR) and reports whether the outputs
are identical and the decode speedup; with ``--json`` one JSON object is printed:
``{"text", "identical_to_ar", "speedup_vs_ar", "mean_accept_len", "reuse_share"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fastcoder.config import METHODS
from fastcoder.errors import FastCoderError

_EXT_LANG = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".ts": "typescript",
    ".tsx": "tsx", ".jsx": "jsx", ".rs": "rust", ".go": "go", ".c": "c", ".h": "c", ".cc": "cpp",
    ".cpp": "cpp", ".hpp": "cpp", ".java": "java", ".lua": "lua", ".sh": "bash", ".rb": "ruby",
    ".cs": "csharp", ".php": "php", ".kt": "kotlin", ".swift": "swift", ".scala": "scala",
}  # fmt: skip


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "edit", help="edit lines of a file following an instruction and print the result",
        epilog="exit status: 0 the edit ended (its closing fence or end of turn); 3 it did not (the token cap "
               "or a loop cut it): what is printed is a cut piece of it; 1 an error",
    )  # fmt: skip
    p.add_argument("file", type=Path)
    p.add_argument("--start-line", type=int, required=True, help="first line to edit (1-based)")
    p.add_argument("--end-line", type=int, required=True, help="last line to edit (inclusive)")
    p.add_argument("--instruction", required=True, help='what to change, e.g. "add type hints"')
    p.add_argument("--language", default=None, help="fence language (default: from the file extension)")
    p.add_argument("--method", default="reuse", choices=list(METHODS), help="decoding method (default: reuse)")
    p.add_argument("--model", default=None, help="builtin name, HF folder, .gguf file or hub id")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: 8 x the selection's tokens + 256")
    p.add_argument("--compare-ar", action="store_true", help="also run AR; report identity and speedup")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the code")
    p.set_defaults(func=run)
    return p


def read_source(path: Path) -> str:
    """The file's text, line endings untouched; clear errors for unreadable or non-UTF-8 files."""
    try:
        data = path.read_bytes()
    except IsADirectoryError as exc:
        raise FastCoderError(f"{path} is a directory, not a file") from exc
    except OSError as exc:
        raise FastCoderError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FastCoderError(
            f"{path} is not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "fastcoder edit only edits UTF-8 files"
        ) from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        raise FastCoderError(f"{path} looks binary (it contains NUL bytes)")
    return text


def run(args: argparse.Namespace) -> int:
    from fastcoder.edit import accepted_share, edit_code, select_lines

    path: Path = args.file
    text = read_source(path)
    _, code, _ = select_lines(text, args.start_line, args.end_line)
    language = args.language or _EXT_LANG.get(path.suffix.lower(), path.suffix.lstrip(".").lower() or "text")

    from fastcoder.engine import Engine
    from fastcoder.models import DEFAULT_MODEL, load_model

    loaded = load_model(args.model or DEFAULT_MODEL, dtype=args.dtype, device=args.device)
    engine = Engine.from_loaded(loaded)
    try:
        kw = dict(language=language, max_new_tokens=args.max_new_tokens)
        if args.compare_ar:
            # warm-up (first forwards allocate), then AR and the method side by side
            edit_code(engine, code, args.instruction, method=args.method, **{**kw, "max_new_tokens": 4})
            ar = edit_code(engine, code, args.instruction, method="ar", **kw)
        res = edit_code(engine, code, args.instruction, method=args.method, **kw)
    finally:
        engine.close()
    gen = res.generation
    share = accepted_share(gen, "reuse")
    unfinished = None if res.finished else (
        f"the edit did not end ({gen.stats.stop_reason} after {gen.stats.new_tokens} tokens): this is a cut piece of it")
    if args.json:
        out: dict = {"text": res.text, "finished": res.finished}
        if args.compare_ar:
            out.update(
                identical_to_ar=ar.generation.tokens == gen.tokens and ar.text == res.text,
                speedup_vs_ar=ar.generation.stats.ms_per_token / max(gen.stats.ms_per_token, 1e-9),
                mean_accept_len=gen.stats.mean_accept_len,
                reuse_share=share,
            )
        else:
            out.update(mean_accept_len=gen.stats.mean_accept_len, reuse_share=share, stats=gen.stats.to_dict())
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0 if res.finished else 3
    sys.stdout.write(res.text if res.text.endswith("\n") else res.text + "\n")
    sys.stdout.flush()
    print(f"--- {gen.stats.summary()}", file=sys.stderr)
    if unfinished:
        print(f"--- {unfinished}", file=sys.stderr)
    if args.compare_ar:
        speedup = ar.generation.stats.ms_per_token / max(gen.stats.ms_per_token, 1e-9)
        e2e = ar.generation.stats.total_s / max(gen.stats.total_s, 1e-9)
        print(
            f"--- identical to AR: {ar.generation.tokens == gen.tokens}   decode speedup vs AR: {speedup:.2f}x   "
            f"end-to-end: {e2e:.2f}x   mean accepted length: {gen.stats.mean_accept_len:.2f}   reuse share: {share:.0%}",
            file=sys.stderr,
        )
    return 0 if res.finished else 3
