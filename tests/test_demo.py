"""`fastcoder demo` / `generate --compare-ar`: a difference from AR is never a bare
"False": it comes with its position, both tokens and AR's top-2 logit margin, and is
called a bf16 tie only when the margin is within bf16 rounding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fastcoder import models
from fastcoder_cli.commands.compare import BF16_NOTE, Difference, first_difference

REPO = Path(__file__).resolve().parent.parent
USER_CACHE = models.cache_root()  # read at import: fixtures may point the cache elsewhere later


def test_first_difference_position_tokens_and_margin(tiny_tokenizer):
    tok = tiny_tokenizer
    a = tok("x = 1\nreturn x", add_special_tokens=False)["input_ids"]
    b = list(a)
    b[3] = a[2]
    margins = [float(i) / 10 for i in range(len(a))]
    d = first_difference(tok, a, b, margins)
    assert d.index == 3 and d.ar_token == tok.decode([a[3]]) and d.method_token == tok.decode([a[2]])
    assert d.ar_margin == 0.3
    assert first_difference(tok, a, list(a), margins) is None
    # one output stops earlier: the other token is "<end>"
    short = first_difference(tok, a, a[:4], margins)
    assert short.index == 4 and short.method_token == "<end>"


def test_descriptions_say_tie_only_within_bf16_rounding():
    tie = Difference(12, " x", " y", 0.0).describe("bfloat16")
    assert "token 12" in tie and "' x'" in tie and "' y'" in tie and "0.000" in tie and "bfloat16 tie" in tie
    wide = Difference(3, "a", "b", 2.5).describe("bfloat16")
    assert "tie" not in wide.replace("not within", "") and "look into it" in wide
    assert "bug" in Difference(3, "a", "b", 0.0).describe("float32")
    # bf16 with batch-invariant steps (the CPU): a tiny margin is no excuse either
    exact = Difference(3, "a", "b", 0.0).describe("bfloat16", exact=True)
    assert "bug" in exact and "batch-invariant" in exact and "tie)" not in exact
    assert "--dtype float32" in BF16_NOTE and "byte-identical" in BF16_NOTE


def test_the_default_demo_targets_exist():
    """`make demo` (the README's first command) runs these: a function moved to another
    file must move here too, or the demo stops before loading the model."""
    from fastcoder_cli.commands.demo_cmd import DEFAULT_TARGETS, _targets
    from fastcoder_cli.commands.generate_cmd import body_span

    targets = _targets(DEFAULT_TARGETS, REPO)
    assert len(targets) == len(DEFAULT_TARGETS) == 5
    for path, func in targets:
        first, last = body_span(path.read_text(encoding="utf-8"), function=func)
        assert 1 <= first <= last, (path, func)


@pytest.mark.slow
def test_demo_on_a_real_model_in_float32_is_byte_identical(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FASTCODER_CACHE", str(USER_CACHE))
    if models.cached_path("smollm2-135m") is None:
        pytest.skip("smollm2-135m is not cached")
    from fastcoder_cli.main import main

    ws = tmp_path / "ws"
    (ws / "fastcoder").mkdir(parents=True)
    shutil.copy(REPO / "fastcoder" / "drafters.py", ws / "fastcoder" / "drafters.py")
    rc = main(["demo", "fastcoder/drafters.py::resync", "--model", "smollm2-135m", "--dtype", "float32",
               "--device", "cpu", "--workspace", str(ws), "--no-common", "--max-new-tokens", "16"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "fastcoder/drafters.py::resync" in out and "aggregate decode speedup vs AR" in out
    assert "byte-identical to AR: 1 of 1 functions" in out and "False" not in out
