"""Draft sources: one protocol, one registry, one list the FastCoder drafter iterates.

A draft source has a name (``GenStats.accepted_by_source`` and the server's
``acceptedBySource`` count accepted tokens under it), a weight in the drafter's
weighted trie, and a way to propose continuations of the committed tokens
(:meth:`DraftSource.propose`, a :class:`fastcoder.search.Retrieval`). Two kinds:

- *registered* sources are made by the drafter for every generation from what it has
  (the config, the session, the reference text): ``context``, ``reference`` and ``cache``
  (:mod:`fastcoder.sources.builtin`). Adding one is one module with a
  :class:`DraftSource` subclass and one ``@register`` on it; every module of this
  package is imported when the registry is first read;
- *given* sources are objects the caller hands over in :class:`Sources`: the
  datastores D_r / D_c / D_d (:class:`Datastore`, searched together under skip tokens
  and the missing table, in parallel) and the other open documents (``buffers``).

Weights: a source's ``weight`` is its default; ``DecodeConfig.source_weights[name]``
overrides it (0 turns the source off); with ``learn_weights`` the session's learned
factor multiplies it (:mod:`fastcoder.source_weights`). Every draft is verified, so
sources change only the speed, never the text.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

from fastcoder.search import Retrieval

if TYPE_CHECKING:  # pragma: no cover
    from fastcoder.config import DecodeConfig
    from fastcoder.session import DraftState
    from fastcoder.trie import DraftTree


class RetrievalSource(Protocol):
    """A datastore: TokenDatastore, or the indexer's incremental D_r."""

    def retrieve(
        self, context: Sequence[int], *, n_max: int, n_min: int, max_nodes: int, max_depth: int
    ) -> Retrieval: ...


@dataclass(frozen=True)
class SourceSetup:
    """What a registered source may be made from, once per generation."""

    config: "DecodeConfig"
    reference: Sequence[int] = ()
    """Text the output is likely to repeat (in the server: the code after the cursor)."""


class DraftSource:
    """One draft source. Subclasses set ``name`` and override :meth:`propose`; the
    hooks (:meth:`start`, :meth:`update`, :meth:`close`) are for sources with state."""

    name: str = ""
    weight: float = 1.0
    """Default trie weight; ``DecodeConfig.source_weights[name]`` overrides it, 0 = off."""
    order: int = 100
    """Position in the trie (ties between equal weights go to the earlier source)."""
    datastore: bool = False
    """Searched with the other datastores: after the in-memory sources, under the
    skip-token rule and the missing table, in parallel threads."""
    exclusive: bool = False
    """A draft from this source skips the datastores this step (the paper's CACHE rule)."""
    topk: int = 0
    """Top next tokens of every verified row this source reads in :meth:`update`
    (``DraftState.step_topk``); 0: none. Known after :meth:`start`."""

    @classmethod
    def create(cls, setup: SourceSetup) -> "DraftSource | None":
        """This source for one generation (registered sources); None: nothing to offer."""
        return cls()

    def start(self, st: "DraftState") -> None:
        """The generation starts: ``st.tokens`` is the prompt."""

    def propose(self, st: "DraftState", max_nodes: int) -> Retrieval | None:
        """Continuations of ``st.tokens`` (weighted paths), or None / empty."""
        return None

    def update(self, st: "DraftState", tree: "DraftTree", accepted: list[int], new_tokens: list[int]) -> None:
        """After a step: the accepted node indices of ``tree`` and the committed tokens
        (already appended to ``st.tokens``)."""

    def close(self, st: "DraftState") -> None:
        """The generation ended."""


# --------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------

_REGISTRY: dict[str, type[DraftSource]] = {}
_loaded = False


def register(cls: type[DraftSource]) -> type[DraftSource]:
    """Register a source class (usable as a decorator): the FastCoder drafter makes it
    (``cls.create``) for every generation. A later registration of the same name
    replaces the earlier one."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def _load_package() -> None:
    """Import every module of this package once (each registers its sources)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")


def registered() -> list[type[DraftSource]]:
    """The registered source classes, in trie order."""
    _load_package()
    return sorted(_REGISTRY.values(), key=lambda c: c.order)


def weight_of(config: "DecodeConfig", name: str) -> float:
    """The trie weight of source ``name`` under ``config`` (before learned factors)."""
    if name in config.source_weights:
        return float(config.source_weights[name])
    _load_package()
    cls = _REGISTRY.get(name)
    if cls is not None:
        return cls.weight
    return GIVEN_DEFAULTS.get(name, (1.0, 100))[0]


# --------------------------------------------------------------------------------------
# given sources: what the caller hands over
# --------------------------------------------------------------------------------------

GIVEN_DEFAULTS: dict[str, tuple[float, int]] = {
    # name: (default weight, trie order)
    "buffers": (1.0, 30),
    "D_r": (1.0, 50),
    "D_c": (1.0, 60),
    "D_d": (1.0, 70),
}


class Datastore(DraftSource):
    """A datastore given by the caller (D_r, D_c, D_d): longest suffix match of the
    last ``n_max`` tokens, down to ``n_min``."""

    datastore = True

    def __init__(self, name: str, store: RetrievalSource) -> None:
        self.name = name
        self.store = store
        self.weight, self.order = GIVEN_DEFAULTS.get(name, (1.0, 100))

    def propose(self, st: "DraftState", max_nodes: int) -> Retrieval:
        cfg = st.config
        return self.store.retrieve(st.tokens[-cfg.n_max :], n_max=cfg.n_max, n_min=cfg.n_min, max_nodes=max_nodes,
                                   max_depth=cfg.max_draft_depth)  # fmt: skip


class Index(DraftSource):
    """A small in-memory n-gram index given by the caller (``buffers``: the other open
    documents): the most recent matches lead (``context_recency``)."""

    def __init__(self, name: str, index) -> None:
        self.name = name
        self.index = index
        self.weight, self.order = GIVEN_DEFAULTS.get(name, (1.0, 100))

    def propose(self, st: "DraftState", max_nodes: int) -> Retrieval:
        return recent(self.index, st, max_nodes)


def recent(index, st: "DraftState", max_nodes: int) -> Retrieval:
    """An :class:`fastcoder.ngram.NgramIndex` lookup as the in-memory sources do it."""
    cfg = st.config
    return index.retrieve(st.tokens, n_max=cfg.n_max, max_nodes=max_nodes, max_depth=cfg.max_draft_depth,
                          recency=cfg.context_recency)  # fmt: skip


_ROLES = {"dr": "D_r", "dc": "D_c", "dd": "D_d", "buffers": "buffers"}


class Sources(list):
    """The caller's draft sources: a list of :class:`DraftSource`, one per name.

    ``Sources(dr=..., dc=..., dd=..., buffers=...)`` wraps the usual ones (a datastore
    with ``retrieve``, an n-gram index for ``buffers``); ``sources.dr`` and the like read
    and replace them by role."""

    def __init__(self, items: Iterable[DraftSource] = (), *, dr=None, dc=None, dd=None, buffers=None) -> None:
        super().__init__()
        for s in items:
            self.put(s)
        for role, obj in (("dr", dr), ("dc", dc), ("dd", dd), ("buffers", buffers)):
            if obj is not None:
                setattr(self, role, obj)

    def put(self, source: DraftSource) -> None:
        """Add ``source``, replacing one of the same name."""
        self[:] = [s for s in self if s.name != source.name]
        self.append(source)

    def get(self, name: str) -> DraftSource | None:
        return next((s for s in self if s.name == name), None)

    def remove_name(self, name: str) -> None:
        self[:] = [s for s in self if s.name != name]

    def _role(self, role: str):
        s = self.get(_ROLES[role])
        return getattr(s, "store", getattr(s, "index", None)) if s is not None else None

    def _set_role(self, role: str, obj) -> None:
        name = _ROLES[role]
        if obj is None:
            self.remove_name(name)
        elif role == "buffers":
            self.put(Index(name, obj))
        else:
            self.put(Datastore(name, obj))

    dr = property(lambda self: self._role("dr"), lambda self, v: self._set_role("dr", v))
    dc = property(lambda self: self._role("dc"), lambda self, v: self._set_role("dc", v))
    dd = property(lambda self: self._role("dd"), lambda self, v: self._set_role("dd", v))
    buffers = property(lambda self: self._role("buffers"), lambda self, v: self._set_role("buffers", v))

    def __repr__(self) -> str:
        return f"Sources({', '.join(s.name for s in self)})"


def timed_search(sources: Sequence[DraftSource], st: "DraftState", max_nodes: int, pool=None,
                 seconds: dict[str, float] | None = None) -> list[Retrieval]:  # fmt: skip
    """Search the datastore sources (in ``pool``'s threads when there are several and
    ``parallel_search``); wall and serial time go to ``st.stats``, each source's to
    ``seconds`` (by name) when given."""

    def one(src):
        t = time.perf_counter()
        r = src.propose(st, max_nodes)
        return r, time.perf_counter() - t

    t0 = time.perf_counter()
    if pool is not None and st.config.parallel_search and len(sources) > 1:
        futures = [pool.submit(one, src) for src in sources]
        results = [f.result() for f in futures]
    else:
        results = [one(src) for src in sources]
    st.stats.search_wall_s += time.perf_counter() - t0
    st.stats.search_serial_s += sum(dt for _, dt in results)
    st.stats.searches += 1
    if seconds is not None:
        seconds.update((src.name, dt) for src, (_, dt) in zip(sources, results))
    return [r for r, _ in results]
