"""Offline replay of drafters on recorded AR outputs (no model), like SuffixDecoding's
simulator: how many tokens would each drafter configuration have had accepted?

For every finished task in ``OUT/tasks.jsonl`` the AR output is the ground truth. The
real decode loop (:func:`fastcoder.decode.generate`: the same drafters, sessions, CACHE
updates, budget trimming and stop rule) runs over a
:class:`fastcoder.replay.ReplayVerifier`, which accepts the longest tree path that
follows the AR tokens and gives the AR token after it as the bonus: the steps are
those of a real run whose model output is the AR output (a test checks it against the
real loop, token for token and step for step). The estimated speedup uses the run's
cost curve c(k):

    est. speedup = sum_tasks AR forwards * c(0)  /  sum_steps (c(draft size) + drafting time)

It is an estimate: the model's own timing varies (the real step costs what it costs
under the machine's load); use it to compare drafter settings, then measure.

Token recycling (``recycle_k``) drafts from the model's own top-k at every row, which a
recording does not hold: the replay runs every FastCoder variant as it would run without it
(``fastcoder-no-recycle``), so on a run where recycling was on (CUDA, fp32) the simulator
under-estimates FastCoder.

Each row also gives an *oracle* estimate: the same steps, each verifying only the path
it accepted (c(accepted nodes) instead of c(draft size)). With a large fixed budget it
bounds what any choice of what to verify could reach from these drafts; with the
adaptive budget it shows what the budget's trimming left on the table.
"""

from __future__ import annotations

import logging
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
    oracle_time_s: float = 0.0
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
            "oracle_speedup_vs_ar": self.ar_time_s / self.oracle_time_s if self.oracle_time_s else None,
        }


def replay_task(
    rec: dict[str, Any],
    config: DecodeConfig,
    sources,
    tokenizer,
    curve,
    session=None,
    *,
    max_nodes: int = 127,
    exact_paths: bool = False,
    paths: bool = False,
    stop_fn=None,
    reference: Sequence[int] | None = None,
    pool=None,
):
    """One recorded task through the real decode loop over its recorded AR output: the
    :class:`fastcoder.decode.Generation` the loop returns (its stats hold the steps).
    ``pool``: the engine's search pool (datastores searched in its threads), or serial."""
    from fastcoder.decode import _eos_ids, generate
    from fastcoder.drafters import make_drafter
    from fastcoder.replay import ReplayVerifier
    from fastcoder.session import Session
    from fastcoder.stops import block_end

    ar = rec["results"]["ar"]
    session = session if session is not None else Session(config)
    eos = sorted(_eos_ids(tokenizer, _NoModel()))
    verifier = ReplayVerifier(ar["tokens"], eos[0] if eos else 0, ended_by_eos=ar["stats"].get("stop_reason") == "eos",
                              max_nodes=max_nodes, exact_paths=exact_paths, paths=paths)  # fmt: skip
    if stop_fn is None and rec.get("task", {}).get("indent") is not None:
        stop_fn = block_end(int(rec["task"]["indent"]), check_first_line=True)  # the suite's stop rule
    drafter = make_drafter(config, sources, reference=reference, pool=pool)
    return generate(verifier, tokenizer, drafter, rec["prompt_ids"], config, session=session, stop_fn=stop_fn,
                    cost_curve=curve if config.max_draft_tokens is None else None)  # fmt: skip


class _NoModel:
    config = None
    generation_config = None


def replay(
    records: Sequence[dict[str, Any]],
    name: str,
    config: DecodeConfig,
    sources_for,
    tokenizer,
    curve,
    *,
    session_mode: str = "per-project",
    exact_paths: bool = False,
    paths: bool = False,
) -> SimResult:
    """Replay one drafter configuration over the recorded tasks (in record order)."""
    from fastcoder.session import Session

    res = SimResult(name, "adaptive" if config.max_draft_tokens is None else str(config.max_draft_tokens))
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
        gen = replay_task(rec, config, sources_for(rec), tokenizer, curve, session, exact_paths=exact_paths, paths=paths)
        st = gen.stats
        if list(gen.tokens) != list(ar["tokens"]):
            log.warning("%s on %s: the replay's output differs from the recorded one", name, rec.get("id"))
        res.tokens += len(ar["tokens"]) - 1
        res.steps += st.forward_steps
        res.draft_nodes += sum(st.draft_sizes)
        res.draft_s += st.retrieval_s + st.tree_s
        if curve is not None:
            res.est_time_s += sum(curve.cost(k) for k in st.draft_sizes)
            res.oracle_time_s += sum(curve.cost(a) for a in st.accept_lengths)
            # AR: one forward per token after the prefill's, and one to see the end-of-sequence
            res.ar_time_s += (len(ar["tokens"]) - 1 + (st.stop_reason == "eos")) * curve.cost(0)
    res.est_time_s += res.draft_s
    if res.oracle_time_s:
        res.oracle_time_s += res.draft_s
    return res


def simulate_dir(out: Path, budgets: Sequence[int | None] = (None, 8, 16, 32, 64, 127), ablate: bool = True) -> list[dict[str, Any]]:
    """Replay pld / rest / fastcoder (and its ablations) over OUT's recorded tasks."""
    import json

    from fastcoder_bench.suite.repo import RepoCorpus
    from fastcoder_bench.suite.runner import RUN_INFO, read_results
    from fastcoder_bench.suite.tasks import make_repo_task
    from fastcoder_bench.suite.variants import make_variants
    from fastcoder.budget import CostCurve
    from fastcoder.datastore import clear_memos
    from fastcoder.drafters import Sources
    from fastcoder.errors import FastCoderError
    from indexer.tokenizing import load_tokenizer

    try:
        info = json.loads((out / RUN_INFO).read_text())
    except (OSError, ValueError) as exc:
        raise FastCoderError(f"no readable {out / RUN_INFO}: {exc}") from exc
    spec = info["spec"]
    # walk as the recorded run's verifier did (runs before exact paths existed: side
    # branches; with path attention: any path short of its block-crossing refusals)
    steps = info.get("machine", {}).get("steps") or {}
    exact_paths, paths = bool(steps.get("exact_paths", False)), bool(steps.get("path_attention", False))
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
    curve = CostCurve.from_json(cc) if cc else None
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
                dr = dr_of(rec) if v.use_dr else None
                clear_memos(dr, dc)  # each variant's drafting starts as cold on each task
                return Sources(dr=dr, dc=dc if v.use_dc else None)

            r = replay(records, v.name, cfg, sources_for, tokenizer, curve, session_mode=spec.get("session", "per-project"),
                       exact_paths=exact_paths, paths=paths)  # fmt: skip
            rows.append(r.as_dict())
            log.info("%s budget %s: accept %.2f", v.name, r.budget, rows[-1]["mean_accept_len"] or 0)
    (out / "simulate.json").write_text(json.dumps({"spec": spec, "cost_curve": cc, "rows": rows}, indent=1))
    return rows


def to_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| drafter | budget (nodes) | mean accepted length | draft nodes / step | est. speedup vs AR | oracle est. |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        f = lambda x, fmt: "–" if x is None else format(x, fmt)  # noqa: E731
        lines.append(f"| {r['name']} | {r['budget']} | {f(r['mean_accept_len'], '.2f')} | "
                     f"{f(r['draft_nodes_per_step'], '.1f')} | {f(r['est_speedup_vs_ar'], '.2f')}× | "
                     f"{f(r.get('oracle_speedup_vs_ar'), '.2f')}× |")
    return "\n".join(lines)
