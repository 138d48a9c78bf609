"""What each common-code source adds: the bench's repository suite with REST and
FastCoder on several D_c / D_d choices, side by side in one process (not a test).

    fastcoder bench sources --out DIR [--limit 10] [--max-new-tokens 128]
        [--common NAME=PATH ...] [--no-dd] [--max-positions 32768]

Variants, interleaved task by task with the bench's harness (``fastcoder_bench.suite``): ``ar``;
``rest-<name>`` for each D_c; ``rest-dd`` (REST with D_d as its only store);
``fastcoder-<name>`` (D_r + that D_c + CACHE + live context); ``fastcoder-<name>+dd``
(the same plus D_d as the third source, weight gamma) for the last D_c.

D_d of a benchmark project = what its virtualenv would hold: the project's runtime
dependencies and pytest's, resolved and downloaded with ``pip download PROJECT==VER
pytest`` (wheels), without the project itself (that is D_r), built with
:mod:`indexer.deps`' reader and :class:`indexer.shards.ShardSet` under
``cache_root()/bench/deps/<project>/``. The popular-PyPI D_c must leave the benchmark
projects out (``build-common --from-pypi-top N --exclude ...``), or it holds the answers.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastcoder_bench.output import recording

log = logging.getLogger(__name__)


def project_deps(project: Any, tokenizer: Any, fingerprint: str, *, extra: tuple[str, ...] = ("pytest",)):
    """The D_d (ShardedStore) of a benchmark project's virtualenv (see the module doc)."""
    from fastcoder_bench.suite.projects import bench_cache
    from indexer.packages import normalize, package_from_tree
    from indexer.persist import dir_lock
    from indexer.pypi import COMPLETE, archive_name_version, extract_py
    from indexer.shards import ShardSet

    base = bench_cache() / "deps" / project.key
    dl = base / "dl"
    if not (dl / COMPLETE).is_file():
        dl.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--only-binary", ":all:",
               "-d", str(dl), project.requirement, *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"pip download for {project.requirement}: {proc.stderr.strip()[-500:]}")
        (dl / COMPLETE).write_text("ok")
    pkgs = []
    for archive in sorted(dl.glob("*.whl")):
        parsed = archive_name_version(archive.name)
        if parsed is None or parsed[0] == normalize(project.name):
            continue
        name, version, _ = parsed
        src = base / "src" / f"{name}-{version}"
        if not (src / COMPLETE).is_file():
            tmp = Path(tempfile.mkdtemp(dir=base, prefix=".x-"))
            extract_py(archive, tmp)
            (tmp / COMPLETE).write_text("ok")
            if src.exists():
                import shutil

                shutil.rmtree(src)
            src.parent.mkdir(parents=True, exist_ok=True)
            tmp.rename(src)
        pkgs.append(package_from_tree(name, version, src))
    shard_set = ShardSet(base / "dd", fingerprint, kind="deps", info={"env": f"bench:{project.key}"})
    with dir_lock(base / "dd"):
        store, _ = shard_set.update(tokenizer, pkgs)
    return store


def _run_args(ap: argparse.ArgumentParser, *, max_prompt_tokens: int) -> None:
    """The arguments the side-by-side run and the replay share."""
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-tokens", type=int, default=max_prompt_tokens)
    ap.add_argument("--common", action="append", default=[], metavar="NAME=PATH",
                    help="a D_c to compare (repeatable; NAME=stdlib alone means the cached stdlib D_c)")
    ap.add_argument("--seed", type=int, default=0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--replay" in argv:
        argv.remove("--replay")
        return replay_main(argv)
    ap = argparse.ArgumentParser(prog="fastcoder bench sources", description=__doc__.splitlines()[0])
    ap.add_argument("--replay", action="store_true", help="the oracle replay instead (see replay_main; its report goes to DIR/replay/)")
    ap.add_argument("--out", required=True, type=Path, metavar="DIR", help="tasks.jsonl (a rerun resumes), report.json and report.md")
    _run_args(ap, max_prompt_tokens=2048)
    ap.add_argument("--no-dd", action="store_true")
    ap.add_argument("--plain", action="store_true", help="search D_c with TokenDatastore.retrieve (default: the faster, equal ShardedStore search)")
    ap.add_argument("--max-positions", type=int, default=0, help="ShardedStore cap on counted occurrences (0: exact)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with recording(args.out, "sources", args, argv) as rec:
        rec.results = _run(args)
    return 0


def _run(args: argparse.Namespace) -> dict:
    """The side-by-side run; prints the summary and returns the figures."""
    from fastcoder_bench.suite.cli import repo_suite
    from fastcoder_bench.suite.projects import load_projects
    from fastcoder_bench.suite.runner import Harness, append_result, machine_info, read_results
    from fastcoder_bench.suite.variants import Variant
    from fastcoder.config import DecodeConfig
    from fastcoder.drafters import Sources
    from fastcoder.engine import Engine
    from fastcoder.models import load_model
    from indexer.common import ensure_common, load_common
    from indexer.shards import ShardedStore

    tasks, corpora = repo_suite(None, args.limit, args.seed, progress=False)
    loaded = load_model(args.model, dtype=args.dtype, device="cpu", progress=False)
    engine = Engine.from_loaded(loaded)  # AR's margins: the harness's untimed pass, where outputs differ
    tok, fp = loaded.tokenizer, loaded.fingerprint

    def wrap(store):
        return store if args.plain else ShardedStore([store], max_positions=args.max_positions)

    commons: dict[str, Any] = {}
    info: dict[str, Any] = {"commons": {}, "dd": {}}
    for spec in args.common or ["stdlib"]:
        name, _, path = spec.partition("=")
        store = ensure_common(tok, progress=False, fingerprint=fp) if not path else load_common(path, fingerprint=fp)
        commons[name] = wrap(store)
        info["commons"][name] = {"path": path or "stdlib", "tokens": store.n_tokens,
                                 "packages": len(store.meta.get("packages", []))}
    dds: dict[str, Any] = {}
    if not args.no_dd:
        projects, _ = load_projects()
        for p in projects:
            t0 = time.perf_counter()
            store = project_deps(p, tok, fp)
            store.max_positions = args.max_positions
            dds[p.name] = store
            info["dd"][p.name] = {"tokens": store.n_tokens, "packages": store.packages(), "seconds": round(time.perf_counter() - t0, 1)}
            log.info("D_d of %s: %d tokens from %s", p.requirement, store.n_tokens, ", ".join(store.packages()))

    n = args.max_new_tokens
    variants: list[Variant] = [Variant("ar", DecodeConfig(method="ar", max_new_tokens=n, seed=args.seed))]
    roles: dict[str, tuple[str | None, bool]] = {}  # variant -> (D_c name or "dd", with D_d)
    for name in commons:
        variants.append(Variant(f"rest-{name}", DecodeConfig(method="rest", max_new_tokens=n, seed=args.seed), use_dc=True))
        roles[f"rest-{name}"] = (name, False)
    if dds:
        variants.append(Variant("rest-dd", DecodeConfig(method="rest", max_new_tokens=n, seed=args.seed), use_dc=True))
        roles["rest-dd"] = ("dd", False)
    for name in commons:
        variants.append(Variant(f"fastcoder-{name}", DecodeConfig(method="fastcoder", max_new_tokens=n, seed=args.seed), use_dr=True, use_dc=True))
        roles[f"fastcoder-{name}"] = (name, False)
    if dds:
        last = list(commons)[-1]
        variants.append(Variant(f"fastcoder-{last}+dd", DecodeConfig(method="fastcoder", max_new_tokens=n, seed=args.seed), use_dr=True, use_dc=True))
        roles[f"fastcoder-{last}+dd"] = (last, True)

    class SourceHarness(Harness):
        group: str | None = None

        def sources(self, variant, dr):
            if variant.name == "ar":
                return Sources()
            dc_name, with_dd = roles[variant.name]
            dd = dds.get(self.group or "")
            dc = dd if dc_name == "dd" else commons[dc_name]
            return Sources(dr=dr if variant.use_dr else None, dc=dc, dd=dd if with_dd else None)

        def run_task(self, task, index, on_variant=None):
            self.group = task.group
            return super().run_task(task, index, on_variant)

        def warm_up(self, task):
            self.group = task.group
            return super().warm_up(task)

    harness = SourceHarness(engine, variants, None, n, args.max_prompt_tokens, corpora=dict(corpora), fingerprint=fp)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    done = {r["id"] for r in read_results(out)}
    pending = [(i, t) for i, t in enumerate(tasks) if t.id not in done]
    machine = machine_info()
    if pending:
        harness.warm_up(pending[0][1])
    for i, task in pending:
        t0 = time.perf_counter()
        rec = harness.run_task(task, i)
        append_result(out, rec)
        log.info("task %d/%d %s: %.0f s", i + 1, len(tasks), task.id, time.perf_counter() - t0)
    records = {r["id"]: r for r in read_results(out)}
    records = [records[t.id] for t in tasks if t.id in records]
    summary = summarize(records, [v.name for v in variants])
    info.update({"machine": machine, "loadavg_end": list(__import__("os").getloadavg()), "tasks": len(records),
                 "max_new_tokens": n, "model": args.model, "dtype": args.dtype, "max_positions": args.max_positions,
                 "summary": summary})
    print(format_summary(summary))
    engine.close()
    return info


def summarize(records: list[dict], names: list[str]) -> dict[str, dict[str, float]]:
    """Per variant: ms/token (decode), speedup over AR (ratio of summed ms/token), mean
    accepted length (decode tokens / forward steps), identical outputs to AR, retrieval
    ms per step."""
    out: dict[str, dict[str, float]] = {}
    for name in names:
        dec_s = toks = steps = retr = searches = 0.0
        same = 0
        for r in records:
            st = r["results"][name]["stats"]
            dec_s += st["decode_s"]
            toks += max(st["new_tokens"] - 1, 0)
            steps += st["forward_steps"]
            retr += st.get("search_wall_s", 0.0)
            searches += st.get("searches", 0)
            same += r["results"][name]["tokens"] == r["results"]["ar"]["tokens"]
        out[name] = {"ms_per_token": 1000 * dec_s / toks if toks else float("nan"),
                     "mean_accept_len": toks / steps if steps else float("nan"),
                     "identical": same / max(1, len(records)),
                     "retrieval_ms_per_search": 1000 * retr / searches if searches else 0.0}
    ar = out["ar"]["ms_per_token"]
    for m in out.values():
        m["speedup"] = ar / m["ms_per_token"] if m["ms_per_token"] else float("nan")
    return out


def format_summary(summary: dict[str, dict[str, float]]) -> str:
    rows = ["| variant | mean accepted length | speedup vs AR | ms/token | identical to AR | retrieval ms/search |", "|---|---|---|---|---|---|"]
    for name, m in summary.items():
        rows.append(f"| {name} | {m['mean_accept_len']:.2f} | {m['speedup']:.2f}x | {m['ms_per_token']:.1f} | {m['identical']:.0%} | {m['retrieval_ms_per_search']:.2f} |")
    return "\n".join(rows)


def report_only(out: Path, names: list[str]) -> str:
    from fastcoder_bench.suite.runner import read_results

    return format_summary(summarize(read_results(out), names))


if __name__ == "__main__":
    raise SystemExit(main())


# --------------------------------------------------------------------------------------
# replay: acceptance without running the model once per variant
# --------------------------------------------------------------------------------------


def replay_main(argv: list[str] | None = None) -> int:
    """``fastcoder bench sources --replay --out DIR ...``:
    greedy reference outputs from the real model (one lossless run per task, saved in
    OUT/reference.jsonl and reused; AR outputs of OUT/tasks.jsonl where present), then
    every variant replayed against them with :class:`fastcoder.replay.ReplayVerifier`. Speed is
    estimated from the measured cost curve: decode time = sum over steps of c(tree
    size) + the measured retrieval time, against c(0) per token for AR."""
    ap = argparse.ArgumentParser(prog="fastcoder bench sources --replay")
    ap.add_argument("--out", required=True, type=Path, metavar="DIR", help="the run's DIR (report in DIR/replay/)")
    _run_args(ap, max_prompt_tokens=1024)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with recording(args.out / "replay", "sources", args, ["--replay", *argv]) as rec:
        rec.results = _replay(args)
    return 0


def _replay(args: argparse.Namespace) -> dict:
    from fastcoder_bench.suite.cli import repo_suite
    from fastcoder_bench.suite.projects import load_projects
    from fastcoder_bench.suite.runner import Harness, read_results
    from fastcoder.config import DecodeConfig
    from fastcoder.datastore import clear_memos
    from fastcoder.decode import generate
    from fastcoder.drafters import Sources, make_drafter
    from fastcoder.engine import Engine
    from fastcoder.models import load_model
    from fastcoder.replay import ReplayVerifier
    from fastcoder.session import Session
    from indexer.common import ensure_common, load_common
    from indexer.shards import ShardedStore

    tasks, corpora = repo_suite(None, args.limit, args.seed, progress=False)
    loaded = load_model(args.model, dtype=args.dtype, device="cpu", progress=False)
    engine = Engine.from_loaded(loaded)
    tok, fp = loaded.tokenizer, loaded.fingerprint
    commons = {}
    for spec in args.common or ["stdlib"]:
        name, _, path = spec.partition("=")
        store = ensure_common(tok, progress=False, fingerprint=fp) if not path else load_common(path, fingerprint=fp)
        commons[name] = ShardedStore([store])
    projects, _ = load_projects()
    dds = {p.name: project_deps(p, tok, fp) for p in projects}
    n = args.max_new_tokens
    last = list(commons)[-1]
    roles = {f"rest-{c}": (c, False, "rest") for c in commons}
    roles["rest-dd"] = ("dd", False, "rest")
    roles.update({f"fastcoder-{c}": (c, False, "fastcoder") for c in commons})
    roles[f"fastcoder-{last}+dd"] = (last, True, "fastcoder")
    roles["fastcoder-nodc+dd"] = (None, True, "fastcoder")
    roles["fastcoder-nodc"] = (None, False, "fastcoder")

    def sources_for(name: str, group: str, dr: Any) -> Any:
        dc_name, with_dd, method = roles[name]
        dd = dds.get(group)
        if method == "rest":
            return Sources(dc=dd if dc_name == "dd" else commons[dc_name])
        return Sources(dr=dr, dc=commons[dc_name] if dc_name else None, dd=dd if with_dd else None)

    harness = Harness(engine, [], None, n, args.max_prompt_tokens, corpora=dict(corpora), fingerprint=fp)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    refs: dict[str, list[int]] = {}
    for r in read_results(out):
        refs[r["id"]] = r["results"]["ar"]["tokens"]
    ref_file = out / "reference.jsonl"
    if ref_file.is_file():
        for line in ref_file.read_text().splitlines():
            rec = json.loads(line)
            refs.setdefault(rec["id"], rec["tokens"])
    curve = engine.cost_curve()
    eos = tok.eos_token_id if tok.eos_token_id is not None else 0
    # 1. references (the real model; the fastest lossless variant)
    for i, task in enumerate(tasks):
        if task.id in refs:
            continue
        t0 = time.perf_counter()
        ids = harness.prompt_ids(task)
        dr = harness.dr_for(task)
        cfg = DecodeConfig(method="fastcoder", max_new_tokens=n, seed=args.seed)
        gen = engine.generate(ids, cfg, session=Session(cfg), sources=sources_for(f"fastcoder-{last}+dd", task.group, dr),
                              stop_fn=task.stop_fn())
        refs[task.id] = list(gen.tokens)
        with open(ref_file, "a") as fh:
            fh.write(json.dumps({"id": task.id, "tokens": gen.tokens, "source": "fastcoder (lossless) run"}) + "\n")
        log.info("reference %d/%d %s: %d tokens, %.0f s", i + 1, len(tasks), task.id, len(gen.tokens), time.perf_counter() - t0)
    # 2. replay every variant (sessions per (variant, project), as the bench does)
    names = list(roles)
    sessions: dict[tuple[str, str], Any] = {}
    rows: dict[str, dict[str, float]] = {nm: {"tokens": 0, "steps": 0, "est_s": 0.0, "retr_s": 0.0, "searches": 0} for nm in names + ["ar"]}
    per_source: dict[str, dict[str, int]] = {}
    for task in tasks:
        ref = refs[task.id]
        ids = harness.prompt_ids(task)
        dr = harness.dr_for(task)
        toks = max(len(ref) - 1, 0)
        rows["ar"]["tokens"] += toks
        rows["ar"]["steps"] += toks
        rows["ar"]["est_s"] += toks * curve.cost(0)
        for nm in names:
            method = roles[nm][2]
            cfg = DecodeConfig(method=method, max_new_tokens=n, seed=args.seed)
            ses = sessions.setdefault((nm, task.group or ""), Session(cfg))
            srcs = sources_for(nm, task.group, dr)
            clear_memos(*(s.store for s in srcs if hasattr(s, "store")))  # each variant drafts equally cold
            drafter = make_drafter(cfg, srcs, pool=engine.pool)
            oracle = ReplayVerifier(ref, eos, max_nodes=engine.verifier.max_nodes, exact_paths=engine.verifier.exact_paths,
                                    paths=engine.verifier.paths)
            gen = generate(oracle, tok, drafter, ids, cfg, session=ses, stop_fn=task.stop_fn(), cost_curve=curve)
            if list(gen.tokens) != list(ref):
                log.warning("%s on %s: replay output differs from the reference (stop rule?)", nm, task.id)
            st = gen.stats
            row = rows[nm]
            row["tokens"] += st.decoded_tokens
            row["steps"] += st.forward_steps
            row["est_s"] += sum(curve.cost(k) for k in st.draft_sizes) + st.retrieval_s
            row["retr_s"] += st.search_wall_s
            row["searches"] += st.searches
            acc = per_source.setdefault(nm, {})
            for src, c in st.accepted_by_source.items():
                acc[src] = acc.get(src, 0) + int(c)
        log.info("replayed %s", task.id)
    ar_ms = 1000 * rows["ar"]["est_s"] / max(1, rows["ar"]["tokens"])
    summary = {}
    for nm, row in rows.items():
        ms = 1000 * row["est_s"] / max(1, row["tokens"])
        summary[nm] = {"mean_accept_len": row["tokens"] / max(1, row["steps"]), "est_ms_per_token": ms, "est_speedup": ar_ms / ms,
                       "retrieval_ms_per_search": 1000 * row["retr_s"] / max(1, row["searches"]),
                       "accepted_by_source": per_source.get(nm, {})}
    results = {"replay": True, "tasks": len(tasks), "max_new_tokens": n, "summary": summary,
               "cost_curve": curve.to_json(),
               "commons": {k: v.n_tokens for k, v in commons.items()},
               "dd_tokens": {k: v.n_tokens for k, v in dds.items()}}
    lines = ["| variant | mean accepted length | est. speedup vs AR (cost curve) | accepted tokens by source |", "|---|---|---|---|"]
    for nm, m in summary.items():
        lines.append(f"| {nm} | {m['mean_accept_len']:.2f} | {m['est_speedup']:.2f}x | {m['accepted_by_source']} |")
    print("\n".join(lines))
    engine.close()
    return results
