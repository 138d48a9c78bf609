"""Weighted draft trie and the draft tree handed to the verifier.

Sources (CACHE, live context, D_r, D_c, D_d, a reference text) each give prefix
paths with exact counts. :class:`WeightedTrie` sums them, node weight
``sum(w_s · t_s)`` (α·t_r + β·t_c in the paper), optionally scaling each source's
counts to frequencies first. :meth:`WeightedTrie.select` takes the heaviest
prefix-closed set of nodes best-first and returns a :class:`DraftTree`: tokens,
parent indices, depths, and per node the source that contributed most weight.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Collection, Sequence

import numpy as np
import torch

Path_ = tuple[int, ...]


@dataclass
class DraftTree:
    """A draft tree below the root (the last committed token).

    Node ``i`` has token ``tokens[i]``, parent ``parents[i]`` (-1 = the root,
    otherwise an index < i), ``depths[i]`` (1 for children of the root),
    ``sources[i]`` (which source drafted it), ``probs[i]`` (estimated chance
    that the path to it is accepted) and ``agree[i]`` (how many sources drafted the
    path to it; empty: not known, taken as 1).
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    agree: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def chain(cls, tokens: Sequence[int], source: str, prob: float = 1.0) -> "DraftTree":
        n = len(tokens)
        return cls(
            tokens=[int(t) for t in tokens],
            parents=list(range(-1, n - 1)),
            depths=list(range(1, n + 1)),
            sources=[source] * n,
            probs=[prob] * n,
        )

    def truncate(self, k: int) -> "DraftTree":
        """The first k nodes (still a tree: parents come before children)."""
        return DraftTree(self.tokens[:k], self.parents[:k], self.depths[:k], self.sources[:k], self.probs[:k], self.agree[:k])

    def depth_first(self) -> list[int]:
        """The nodes in depth-first preorder, each node's children in index order (the
        best-first order the budget and the trie give, so the likeliest child first):
        the path of first children is contiguous right below the root, as an AR chain
        would lay it out."""
        kids: list[list[int]] = [[] for _ in range(len(self) + 1)]
        for i, p in enumerate(self.parents):
            kids[p + 1].append(i)
        order: list[int] = []
        stack = kids[0][::-1]
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(kids[i + 1][::-1])
        return order

    def first_path(self) -> list[int]:
        """The path of first children from the root (each node's child of lowest index:
        in the best-first order the budget and the trie give, the likeliest), as node
        indices: what a batch-invariant verifier can accept (:attr:`Verifier.exact_paths`)."""
        first: dict[int, int] = {}
        for i, p in enumerate(self.parents):
            first.setdefault(p, i)
        path = []
        node = first.get(-1)
        while node is not None:
            path.append(node)
            node = first.get(node)
        return path

    def permute(self, order: list[int]) -> "DraftTree":
        """The nodes ``order`` (old indices) as a tree in that order: a reordering, or a
        subset that keeps every kept node's parent (parents must come first)."""
        new = {old: j for j, old in enumerate(order)}
        return DraftTree(
            [self.tokens[i] for i in order],
            [new[self.parents[i]] if self.parents[i] >= 0 else -1 for i in order],
            [self.depths[i] for i in order],
            [self.sources[i] for i in order],
            [self.probs[i] for i in order],
            [self.agree[i] for i in order] if self.agree else [],
        )

    def limit_depth(self, depth: int, stop_ids: Collection[int] = ()) -> "DraftTree":
        """Only the nodes that could still be committed: at depth <= ``depth`` and not
        below a node whose token ends the output (``stop_ids``; that node stays:
        accepting it ends the output). Parents come before children, so one pass keeps
        a tree, in the same (best-first) order."""
        if not self.tokens or (max(self.depths) <= depth and not any(t in stop_ids for t in self.tokens)):
            return self
        dead = [False] * len(self)
        keep = []
        for i, (p, d) in enumerate(zip(self.parents, self.depths)):
            if d > depth or (p >= 0 and (dead[p] or self.tokens[p] in stop_ids)):
                dead[i] = True
            else:
                keep.append(i)
        if len(keep) == len(self):
            return self
        return self.permute(keep)

    def children(self) -> list[dict[int, int]]:
        """children()[p + 1] maps token -> node index for parent p (-1 = root)."""
        out: list[dict[int, int]] = [dict() for _ in range(len(self) + 1)]
        for i, (tok, par) in enumerate(zip(self.tokens, self.parents)):
            out[par + 1].setdefault(tok, i)
        return out

    def attention_mask(self, past_len: int, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
        """Additive float mask (1, 1, q, past_len + q) for inputs [root] + nodes:
        0 where a query may attend (all the past, its ancestors and itself), finfo.min
        elsewhere. A boolean mask gives wrong logits under eager attention."""
        q = len(self) + 1
        allowed = np.zeros((q, q), dtype=bool)
        allowed[0, 0] = True
        for i, par in enumerate(self.parents):
            row = i + 1
            allowed[row] = allowed[par + 1]
            allowed[row, row] = True
        tree = torch.from_numpy(allowed)
        mask = torch.full((q, past_len + q), torch.finfo(dtype).min, dtype=dtype)
        mask[:, :past_len] = 0
        mask[:, past_len:].masked_fill_(tree, 0)
        return mask.view(1, 1, q, past_len + q).to(device)

    def position_ids(self, past_len: int, device: torch.device | str = "cpu") -> torch.Tensor:
        pos = [past_len] + [past_len + d for d in self.depths]
        return torch.tensor([pos], dtype=torch.long, device=device)


class WeightedTrie:
    """Sum of weighted prefix counts from several sources."""

    def __init__(self, weighting: str = "freq") -> None:
        self.weighting = weighting
        self.weight: dict[Path_, float] = {}
        self.best_source: dict[Path_, tuple[float, str]] = {}
        self.agree: dict[Path_, int] = {}  # how many sources drafted each path

    def __bool__(self) -> bool:
        return bool(self.weight)

    def add(self, nodes: Sequence[tuple[Path_, int]], source: str, weight: float = 1.0, total: int | None = None) -> None:
        """Add one source's prefix counts. ``total`` = occurrences of the matched
        suffix (the root count) for 'freq' weighting; defaults to the sum of the
        depth-1 counts."""
        if not nodes or weight == 0:
            return
        scale = weight
        if self.weighting == "freq":
            root = total if total else sum(c for p, c in nodes if len(p) == 1)
            scale = weight / max(root, 1)
        for path, count in nodes:
            w = count * scale
            self.weight[path] = self.weight.get(path, 0.0) + w
            self.agree[path] = self.agree.get(path, 0) + 1
            prev = self.best_source.get(path)
            if prev is None or w > prev[0]:
                self.best_source[path] = (w, source)

    def select(self, max_nodes: int, max_depth: int = 64) -> DraftTree:
        """Heaviest prefix-closed set of at most ``max_nodes`` nodes, best-first.

        A child never outweighs its parent (prefix counts only shrink), so best-first
        from the root yields the heaviest nodes in order of decreasing weight.
        """
        tree = DraftTree()
        if max_nodes <= 0 or not self.weight:
            return tree
        children: dict[Path_, list[Path_]] = {}
        for path in self.weight:
            if len(path) <= max_depth:
                children.setdefault(path[:-1], []).append(path)
        norm = sum(self.weight[p] for p in children.get((), [])) or 1.0
        index: dict[Path_, int] = {}
        heap: list[tuple[float, int, Path_]] = []
        order = 0
        for p in children.get((), []):
            heapq.heappush(heap, (-self.weight[p], order, p))
            order += 1
        while heap and len(tree) < max_nodes:
            negw, _, path = heapq.heappop(heap)
            index[path] = len(tree)
            tree.tokens.append(path[-1])
            tree.parents.append(index[path[:-1]] if len(path) > 1 else -1)
            tree.depths.append(len(path))
            tree.sources.append(self.best_source[path][1])
            tree.probs.append(min(1.0, -negw / norm))
            tree.agree.append(self.agree[path])
            for child in children.get(path, []):
                heapq.heappush(heap, (-self.weight[child], order, child))
                order += 1
        return tree
