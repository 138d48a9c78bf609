"""Files → token datastores: workspace scan, D_r (incremental, watched, persisted), D_c.

What the server uses::

    from indexer import WorkspaceIndex, ensure_common

    index = WorkspaceIndex([root], tokenizer, on_progress=..., on_status=...,
                           on_indexed=..., on_removed=...)
    index.start()                      # background: load/build, then watch
    sources = Sources(dr=index.source, dc=ensure_common(tokenizer))
    index.update_buffer(path, text)    # an open editor buffer wins over the disk
    index.release_buffer(path)
    index.rebuild(); index.stop()

Names are imported lazily, so ``import indexer`` is cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RepoIndex",
    "WorkspaceIndex",
    "WorkspaceFilter",
    "build_common",
    "default_common_path",
    "ensure_common",
    "load_common",
    "load_tokenizer",
]

_WHERE = {
    "RepoIndex": "indexer.repo_store",
    "WorkspaceIndex": "indexer.workspace",
    "WorkspaceFilter": "indexer.scan",
    "build_common": "indexer.common",
    "default_common_path": "indexer.common",
    "ensure_common": "indexer.common",
    "load_common": "indexer.common",
    "load_tokenizer": "indexer.tokenizing",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'indexer' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
