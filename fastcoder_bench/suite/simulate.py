"""Offline replay of drafters on recorded AR outputs (no model), like SuffixDecoding's
simulator: how many tokens would each drafter configuration have had accepted?

For every finished task in ``OUT/tasks.jsonl`` the AR output is the ground truth. A
drafter drafts from the prompt plus the AR output so far, exactly as in the decode
loop (same drafters, sessions, CACHE updates and budget trimming); the accepted path is
the longest path of the tree that follows the AR tokens, then the AR token after it is
the bonus. The estimated speedup uses the run's cost curve c(k):

    est. speedup = sum_tasks (n - 1) * c(0)  /  sum_steps (c(draft size) + drafting time)

It is an estimate: the real loop stops drafting past the stop rule's cut and the
model's own timing varies; use it to compare drafter settings, then measure.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from fastcoder.config import DecodeConfig

log = logging.getLogger(__name__)


@dataclass
class SimResult:
    name: str
    budget: str
    tokens: int = 0
    steps: int = 0
    draft_nodes: int = 0
    est_time_s: float = 0.0
    ar_time_s: float = 0.0
    draft_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "budget": self.budget,
            "decode_tokens": self.tokens,
            "steps": self.steps,
            "mean_accept_len": self.tokens / self.steps if self.steps else None,
            "draft_nodes_per_step": self.draft_nodes / self.steps if self.steps else None,
            "draft_ms_per_step": 1000 * self.draft_s / self.steps if self.steps else None,
            "est_speedup_vs_ar": self.ar_time_s / self.est_time_s if self.est_time_s else None,
        }


def _accept(tree, target: Sequence[int]) -> list[int]:
    children = tree.children()
    row, path = 0, []
    for tok in target:
        nxt = children[row].get(tok) if row < len(children) else None
        if nxt is None:
            break
        path.append(nxt)
        row = nxt + 1
    return path


def replay(
    records: Sequence[dict[str, Any]],
    name: str,
    config: DecodeConfig,
    sources_for,
    tokenizer,
    curve,
    *,
    session_mode: str = "per-project",
) -> SimResult:
    """Replay one drafter configuration over the recorded tasks (in record order)."""
    from fastcoder.budget import StepBudget
    from fastcoder.drafters import DraftState, make_drafter
    from fastcoder.session import Session
    from fastcoder.stats import GenStats
    from fastcoder.tokens import TokenInfo
    from fastcoder.trie import DraftTree

    res = SimResult(name, "adaptive" if config.max_draft_tokens is None else str(config.max_draft_tokens))
    info = TokenInfo.for_tokenizer(tokenizer)
    sessions: dict[Any, Session] = {}
    for rec in records:
        ar = rec["results"].get("ar")
        if ar is None or len(ar["tokens"]) < 2:
            continue
        group = rec["task"].get("group")
        if session_mode == "per-task" or group is None:
            session = Session(config)
        else:
            session = sessions.setdefault(group, Session(config))
        out = list(ar["tokens"])
        drafter = make_drafter(config, sources_for(rec), pool=None)
        # start() sees the prompt only, as in the loop (the first token comes from the prefill)
        st = DraftState(list(rec["prompt_ids"]), len(rec["prompt_ids"]), config, session, GenStats(), info)
        drafter.start(st)
        st.tokens.append(out[0])
        done = 1
        budget = StepBudget(curve, config.max_draft_tokens is None and drafter.adaptive_budget, session.calibration)
        while done < len(out):
            t0 = time.perf_counter()
            k = config.max_draft_tokens if config.max_draft_tokens is not None else 64
            tree = drafter.draft(st, k) if k > 0 and budget.should_draft() else DraftTree()
            tree = budget.trim(tree)
            tree = tree.limit_depth(len(out) - done - 1)
            res.draft_s += time.perf_counter() - t0
            accepted = _accept(tree, out[done:])
            budget.observe(tree, len(accepted))
            n_new = min(len(accepted) + 1, len(out) - done)
            committed = out[done : done + n_new]
            st.tokens.extend(committed)
            drafter.update(st, tree, accepted[: n_new], committed)
            done += n_new
            res.steps += 1
            res.draft_nodes += len(tree)
            if curve is not None:
                res.est_time_s += curve.cost(len(tree))
        if ar["stats"].get("stop_reason") == "eos":
            # the real loop needed one more forward to see the end-of-sequence token
            k = config.max_draft_tokens if config.max_draft_tokens is not None else 64
            tree = drafter.draft(st, k) if k > 0 and budget.should_draft() else DraftTree()
            tree = budget.trim(tree)
            res.steps += 1
            res.draft_nodes += len(tree)
            if curve is not None:
                res.est_time_s += curve.cost(len(tree))
                res.ar_time_s += curve.cost(0)
        drafter.close()
        session.calibration = budget.calibration
        res.tokens += len(out) - 1
        if curve is not None:
            res.ar_time_s += (len(out) - 1) * curve.cost(0)
    res.est_time_s += res.draft_s
    return res


def simulate_dir(out: Path, budgets: Sequence[int | None] = (None, 8, 16, 32, 64), ablate: bool = True) -> list[dict[str, Any]]:
    """Replay pld / rest / fastcoder (and its ablations) over OUT's recorded tasks."""
    import json

    from fastcoder_bench.suite.repo import RepoCorpus
    from fastcoder_bench.suite.runner import RUN_INFO, read_results
    from fastcoder_bench.suite.tasks import make_repo_task
    from fastcoder_bench.suite.variants import make_variants
    from fastcoder.budget import CostCurve
    from fastcoder.drafters import Sources
    from fastcoder.errors import FastCoderError
    from indexer.tokenizing import load_tokenizer

    try:
        info = json.loads((out / RUN_INFO).read_text())
    except (OSError, ValueError) as exc:
        raise FastCoderError(f"no readable {out / RUN_INFO}: {exc}") from exc
    spec = info["spec"]
    records = sorted(read_results(out), key=lambda r: r.get("index", 0))
    if not records:
        raise FastCoderError(f"{out} has no finished tasks to replay")
    tokenizer = load_tokenizer(spec["model"], progress=False)
    from fastcoder.models import tokenizer_fingerprint

    fp = tokenizer_fingerprint(tokenizer)
    if spec.get("common") in (None, "stdlib"):
        from indexer.common import ensure_common

        dc = ensure_common(tokenizer, progress=False, fingerprint=fp)
    elif spec["common"] == "none":
        dc = None
    else:
        from indexer.common import load_common

        dc = load_common(spec["common"], fingerprint=fp)
    cc = info.get("machine", {}).get("cost_curve")
    curve = CostCurve(cc["ks"], cc["seconds"]) if cc else None
    corpora: dict[str, RepoCorpus] = {}
    drs: dict[str, Any] = {}

    def dr_of(rec):
        t = rec["task"]
        if not t.get("repo") or not t.get("path") or not t.get("body_lines"):
            return None
        if rec["id"] not in drs:
            repo = t["repo"]
            if repo not in corpora:
                corpora[repo] = RepoCorpus(repo, name=t.get("group"))
            c = corpora[repo]
            text = (Path(repo) / t["path"]).read_text(encoding="utf-8")
            task = make_repo_task(rec["id"], Path(repo), t["path"], text, *t["body_lines"], group=t.get("group"))
            drs[rec["id"]] = c.dr_for(task, tokenizer, fp)
        return drs[rec["id"]]

    variants = [v for v in make_variants(["pld", "rest", "fastcoder", "fastcoder-paper"], ablate=ablate, max_new_tokens=spec["max_new_tokens"])
                if v.name != "ar"]
    rows = []
    for v in variants:
        for b in budgets:
            if v.name == "pld" and b is not None and b > 10:
                continue  # a 10-token chain at most
            cfg = v.config.replace(max_draft_tokens=b)

            def sources_for(rec, v=v):
                return Sources(dr=dr_of(rec) if v.use_dr else None, dc=dc if v.use_dc else None)

            r = replay(records, v.name, cfg, sources_for, tokenizer, curve, session_mode=spec.get("session", "per-project"))
            rows.append(r.as_dict())
            log.info("%s budget %s: accept %.2f", v.name, r.budget, rows[-1]["mean_accept_len"] or 0)
    (out / "simulate.json").write_text(json.dumps({"spec": spec, "cost_curve": cc, "rows": rows}, indent=1))
    return rows


def to_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| drafter | budget (nodes) | mean accepted length | draft nodes / step | est. speedup vs AR |",
             "|---|---|---:|---:|---:|"]
    for r in rows:
        f = lambda x, fmt: "–" if x is None else format(x, fmt)  # noqa: E731
        lines.append(f"| {r['name']} | {r['budget']} | {f(r['mean_accept_len'], '.2f')} | "
                     f"{f(r['draft_nodes_per_step'], '.1f')} | {f(r['est_speedup_vs_ar'], '.2f')}× |")
    return "\n".join(lines)
