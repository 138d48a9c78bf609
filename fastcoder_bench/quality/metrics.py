"""Scoring a suggestion against what the developer wrote (CrossCodeEval's metrics).

* prediction: a ``line`` task takes the suggestion's first line, a ``block`` task its
  first ``len(target lines)`` lines;
* exact match: the whitespace-stripped lines are equal;
* edit similarity: ``1 - levenshtein(p, t) / max(len(p), len(t))`` on the stripped
  text (lines stripped, joined with ``\\n``);
* identifier match: the sequence of identifiers (``[A-Za-z_][A-Za-z0-9_]*``, keywords
  included) of the prediction equals the target's.

An empty suggestion is a miss on every metric (edit similarity 0).
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions), two rows of memory."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _stripped(text: str) -> str:
    return "\n".join(line.strip() for line in text.split("\n"))


def edit_similarity(pred: str, target: str) -> float:
    p, t = _stripped(pred), _stripped(target)
    if not p and not t:
        return 1.0
    return 1.0 - levenshtein(p, t) / max(len(p), len(t))


def identifiers(text: str) -> list[str]:
    return IDENT.findall(text)


def identifier_match(pred: str, target: str) -> bool:
    return identifiers(pred) == identifiers(target)


def exact_match(pred: str, target: str) -> bool:
    return _stripped(pred) == _stripped(target)


def prediction(suggestion: str, kind: str, target_lines: int) -> str:
    """What of the suggestion is compared: its first line (``line``, ``midname``) or its
    first ``target_lines`` lines (``block``)."""
    lines = suggestion.split("\n")
    return "\n".join(lines[:target_lines]) if kind == "block" else lines[0]


def score(suggestion: str, kind: str, target: str) -> dict[str, Any]:
    """The three metrics of one suggestion (empty: a miss)."""
    pred = prediction(suggestion, kind, len(target.split("\n")))
    if not pred.strip():
        return {"prediction": pred, "empty": True, "exact_match": False, "edit_similarity": 0.0,
                "identifier_match": False}  # fmt: skip
    return {"prediction": pred, "empty": False, "exact_match": exact_match(pred, target),
            "edit_similarity": edit_similarity(pred, target), "identifier_match": identifier_match(pred, target)}  # fmt: skip


def _mean(values: Iterable[float]) -> float | None:
    v = list(values)
    return sum(v) / len(v) if v else None


def _p50(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) / 2
    return (s[math.floor(k)] + s[math.ceil(k)]) / 2


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant's figures over ``rows`` (per task: the :func:`score` fields plus
    ``prompt_tokens``, ``context_tokens``, ``model_ms`` (None: the model did not run),
    ``request_ms``, ``error``)."""
    model = [r["model_ms"] for r in rows if r.get("model_ms") is not None]
    return {
        "n": len(rows),
        "exact_match": _mean(float(r["exact_match"]) for r in rows),
        "edit_similarity": _mean(r["edit_similarity"] for r in rows),
        "identifier_match": _mean(float(r["identifier_match"]) for r in rows),
        "empty_share": _mean(float(r["empty"]) for r in rows),
        "errors": sum(1 for r in rows if r.get("error")),
        "prompt_tokens_mean": _mean(r.get("prompt_tokens", 0) for r in rows if r.get("model_ms") is not None),
        "context_tokens_mean": _mean(r.get("context_tokens", 0) for r in rows if r.get("model_ms") is not None),
        "latency_ms_p50": _p50(model),  # the model run (engine prefill + decode), from the server's stats
        "request_ms_p50": _p50([r["request_ms"] for r in rows if r.get("request_ms") is not None]),
        "model_runs": len(model),
    }


def ratios(variants: dict[str, dict[str, Any]], base: str = "no-context") -> dict[str, dict[str, float | None]]:
    """Each variant's metrics over the ``base`` variant's."""
    b = variants.get(base)
    out: dict[str, dict[str, float | None]] = {}
    if b is None:
        return out
    for name, v in variants.items():
        out[name] = {k: (v[k] / b[k]) if (v.get(k) is not None and b.get(k)) else None
                     for k in ("exact_match", "edit_similarity", "identifier_match", "prompt_tokens_mean", "latency_ms_p50")}  # fmt: skip
    return out


def paired(base_rows: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A variant against the base variant task by task (the rows in the same task order):
    exact matches gained and lost, edit similarity better / worse / equal, and the mean
    edit-similarity difference with its standard error (sample standard deviation over
    sqrt(n)): whether a difference in the means is more than a few tasks' noise."""
    if len(base_rows) != len(rows):
        raise ValueError(f"paired: {len(rows)} rows against {len(base_rows)} of the base")
    diffs = [r["edit_similarity"] - b["edit_similarity"] for b, r in zip(base_rows, rows)]
    n = len(diffs)
    mean = sum(diffs) / n if n else None
    se = (math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) / math.sqrt(n)) if n > 1 else None
    return {
        "n": n,
        "exact_gained": sum(1 for b, r in zip(base_rows, rows) if r["exact_match"] and not b["exact_match"]),
        "exact_lost": sum(1 for b, r in zip(base_rows, rows) if b["exact_match"] and not r["exact_match"]),
        "edit_better": sum(1 for d in diffs if d > 0),
        "edit_worse": sum(1 for d in diffs if d < 0),
        "edit_equal": sum(1 for d in diffs if d == 0),
        "edit_diff_mean": mean,
        "edit_diff_se": se,
    }
