"""The ``fastcoder`` command line: the layer above the rooms that wires them together.

:mod:`.main` is the console script (``fastcoder``; ``python -m fastcoder_cli``); each
subcommand is one module of :mod:`.commands` (``bench`` is :mod:`fastcoder_bench.cli`).
Nothing in ``fastcoder``, ``indexer`` or ``lsp_server`` imports from here.
"""
