"""The `fastcoder` console script.

Each subcommand lives in its own module that exposes ``add_parser(subparsers)``;
the parser sets ``func`` (a callable taking the parsed args and returning an exit
code). Modules are imported lazily so `fastcoder models list` does not import torch.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# subcommand name -> module providing add_parser(subparsers)
COMMANDS: dict[str, str] = {
    "models": "fastcoder_cli.commands.models_cmd",
    "generate": "fastcoder_cli.commands.generate_cmd",
    "serve": "fastcoder_cli.commands.serve_cmd",
    "index": "fastcoder_cli.commands.index_cmd",
    "build-common": "fastcoder_cli.commands.build_common_cmd",
    "bench": "fastcoder_bench.cli",
    "edit": "fastcoder_cli.commands.edit_cmd",
    "demo": "fastcoder_cli.commands.demo_cmd",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fastcoder", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is not None and name != only:
            # still list it in --help, but do not import its module
            sub.add_parser(name, help=f"(see `fastcoder {name} --help`)")
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a subcommand not built yet
            if exc.name and module.startswith(exc.name):
                sub.add_parser(name, help="(not available in this build)")
                continue
            raise
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # clear message, no traceback for expected errors
        from fastcoder.errors import FastCoderError

        if isinstance(exc, FastCoderError):
            print(f"fastcoder: error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
