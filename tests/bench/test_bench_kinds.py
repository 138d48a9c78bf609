"""`fastcoder bench KIND`: one entry for every benchmark, one report shape (report.json
+ report.md) for every kind; `fastcoder bench` without a KIND stays the suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastcoder_cli.main import build_parser, main
from fastcoder_bench.cli import KINDS
from fastcoder_bench.output import recording

# the suite's fixtures (a tiny repository, its task file, a small D_c)
from test_bench_run import _argv, bench_repo, common_path, task_file  # noqa: F401

SHAPE = {"kind", "created", "command", "machine", "run", "results"}


def test_every_kind_is_listed_and_parses():
    assert list(KINDS) == ["suite", "replay", "live", "edit", "retrieval", "index", "scale", "sources", "soak", "quality"]
    parser = build_parser(only="bench")
    help_text = parser._subparsers._group_actions[0].choices["bench"].format_help()
    for kind in KINDS:
        assert f"    {kind}" in help_text
    # today's flags, no KIND: the suite
    args = parser.parse_args(["bench", "--suite", "repo", "--limit", "3", "--out", "d"])
    assert args.kind is None and args.suite == "repo" and args.limit == 3
    # a KIND takes every following argument, --help and --out included, to its own parser
    args = parser.parse_args(["bench", "replay", "--help", "--out", "d", "-v"])
    assert args.kind == "replay" and args.argv == ["--help", "--out", "d", "-v"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_kind_help_is_its_own(kind, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", kind, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fastcoder bench {kind}")
    assert "--out" in out


def test_recording_writes_one_shape(tmp_path: Path, capsys):
    with recording(tmp_path / "r", "demo", {"n": 3, "path": tmp_path}, ["--n", "3"]) as rec:
        print("| a | b |")
        rec.results = {"p50_ms": 1.5}
    assert "| a | b |" in capsys.readouterr().out  # still printed
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert set(report) == SHAPE
    assert report["kind"] == "demo" and report["results"] == {"p50_ms": 1.5}
    assert report["command"] == "fastcoder bench demo --n 3"
    assert report["run"]["args"] == {"n": 3, "path": str(tmp_path)}
    assert {"cpu", "cpu_count", "loadavg_start", "loadavg_end"} <= set(report["machine"])
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith("# fastcoder bench: demo\n") and "| a | b |" in md


def test_recording_writes_nothing_for_a_failed_run(tmp_path: Path):
    with pytest.raises(RuntimeError):
        with recording(tmp_path, "demo", {}, []) as rec:
            rec.results = {"half": True}
            raise RuntimeError("boom")
    assert not (tmp_path / "report.json").exists() and not (tmp_path / "report.md").exists()


def test_retrieval_kind_end_to_end(tiny_model_dir, common_path, tmp_path: Path):  # noqa: F811
    queries = tmp_path / "q"
    queries.mkdir()
    for name in ("a.py", "b.py"):
        (queries / name).write_text("def f(x):\n    return [y * 2 for y in range(x) if y % 3]\n" * 20)
    out = tmp_path / "out"
    rc = main(["bench", "retrieval", "--model", str(tiny_model_dir), "--store", str(common_path),
               "--queries", "40", "--query-dir", str(queries), "--out", str(out)])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report) == SHAPE and report["kind"] == "retrieval"
    r = report["results"]
    assert r["retrieve"]["n"] == 40 and r["cache_lookup"]["n"] == 40
    assert sum(r["match_len_hist"]) == 40 and r["store_tokens"] > 0
    assert "datastore retrieval: p50" in (out / "report.md").read_text()


def test_suite_kind_is_the_default(tiny_model_dir, task_file, common_path, tmp_path: Path):  # noqa: F811
    out = tmp_path / "suite"
    argv = _argv(tiny_model_dir, task_file, common_path, out, "--methods", "ar,pld", "--limit", "1")
    assert main(["bench", "suite", *argv[1:]]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["kind"] == "suite" and set(report["methods"]) == {"ar", "pld"}
    assert {"machine", "model", "dtype", "tasks", "methods", "per_task", "run"} <= set(report)
    assert (out / "report.md").read_text().startswith("# fastcoder bench: ")


def test_an_ablation_can_be_named_alone_in_methods():
    """`--methods ar,fastcoder,fastcoder-n2` runs that one ablation beside FastCoder
    (not all of them, as --ablate does), with its config change."""
    from fastcoder_bench.suite.variants import make_variants, parse_methods

    methods = parse_methods("fastcoder,fastcoder-n2")
    assert methods == ["ar", "fastcoder", "fastcoder-n2"]
    by_name = {v.name: v for v in make_variants(methods, ablate=False, max_new_tokens=8)}
    assert list(by_name) == methods
    assert by_name["fastcoder-n2"].config.n_min == 2 and by_name["fastcoder"].config.n_min == 1
    assert by_name["fastcoder-n2"].use_dr and by_name["fastcoder-n2"].use_dc
    every = [v.name for v in make_variants(methods, ablate=True, max_new_tokens=8)]
    assert every.count("fastcoder-n2") == 1 and "fastcoder-no-cache" in every


def test_explicit_attention_methods_run_on_a_second_engine(tiny_model_dir, task_file, common_path, tmp_path: Path):  # noqa: F811
    """`ar-explicit` / `fastcoder-explicit` are AR and FastCoder on a second engine over
    the same model whose verifier may compute attention as two matrix products
    (explicitAttention auto): both run in the same suite run, the report carries that
    engine's step status (the tiny fp32 model is not batch-invariant: never used there)."""
    from fastcoder_bench.suite.variants import make_variants, parse_methods

    by_name = {v.name: v for v in make_variants(parse_methods("fastcoder,ar-explicit,fastcoder-explicit,fastcoder-chain"),
                                                ablate=False, max_new_tokens=8)}  # fmt: skip
    assert by_name["ar-explicit"].config.method == "ar" and by_name["ar-explicit"].engine == "explicit"
    assert by_name["fastcoder-chain"].config.method == "fastcoder" and by_name["fastcoder-chain"].engine == "chain"
    assert by_name["fastcoder-explicit"].use_dr and by_name["fastcoder"].engine == ""
    out = tmp_path / "suite"
    argv = _argv(tiny_model_dir, task_file, common_path, out, "--methods", "ar,ar-explicit", "--limit", "1")
    assert main(["bench", "suite", *argv[1:]]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["methods"]) == {"ar", "ar-explicit"}
    assert report["machine"]["steps_explicit"]["mode"] == "eager"
