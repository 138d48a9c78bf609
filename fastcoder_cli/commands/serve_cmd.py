"""``fastcoder serve``: run the language server (stdio; ``--tcp HOST:PORT`` for debugging)."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("serve", help="run the FastCoder language server (stdio)")
    p.add_argument("--model", help="builtin name, local HF folder, .gguf file or hub id (default qwen2.5-coder-0.5b)")
    p.add_argument("--dtype", help="auto, float32 or bfloat16 (default auto)")
    p.add_argument("--device", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--method", help="drafter: ar, pld, rest, fastcoder or reuse (default fastcoder)")
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio (debugging)")
    p.add_argument("--log-file", help="also write the server log to this file")
    p.set_defaults(func=serve)


def _setup_logging(log_file: str | None, verbose: bool) -> None:
    root = logging.getLogger()
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if not root.handlers:  # not started through fastcoder_cli
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # pygls logs every message body at INFO: far too much for a log people read
    for name in ("pygls", "pygls.protocol", "pygls.server", "pygls.feature_manager"):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)


def serve(args: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _setup_logging(args.log_file, getattr(args, "verbose", False))
    from lsp_server.server import make_server
    from lsp_server.settings import ServerSettings, SettingsError

    overrides = {k: getattr(args, k) for k in ("model", "dtype", "device", "method") if getattr(args, k, None)}
    try:
        settings = ServerSettings().merged(overrides)
    except SettingsError as exc:
        print(f"fastcoder serve: error: {exc}", file=sys.stderr)
        return 2
    server = make_server(settings)
    log = logging.getLogger("lsp_server")
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        try:
            port_n = int(port)
        except ValueError:
            print(f"fastcoder serve: error: --tcp needs HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        log.info("listening on %s:%d", host or "127.0.0.1", port_n)
        server.start_tcp(host or "127.0.0.1", port_n)
    else:
        # the protocol owns the real stdout; a stray print() anywhere must not corrupt it
        protocol_out = sys.stdout.buffer
        sys.stdout = sys.stderr
        server.start_io(sys.stdin.buffer, protocol_out)
    # The model thread may be in the middle of a forward pass or a load; do not wait for it.
    code = 0 if server.protocol._shutdown else 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # pygls closed stdout at exit
            pass
    os._exit(code)
