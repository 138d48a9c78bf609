"""`fastcoder bench quality`: does a suggestion match what the developer wrote next?

CrossCodeEval's construction (Ding et al. 2023): cursor positions in function bodies of
real projects where the target line uses a name defined in another file of the project
(:mod:`.tasks`), each asked of the real server over stdio with cross-file context
variants side by side (:mod:`.run`), scored by exact match, edit similarity and
identifier match (:mod:`.metrics`).

    fastcoder bench quality --projects 4 --tasks 200 --out DIR
    fastcoder bench quality --root ~/src/myproject --tasks 20 --variants no-context,definitions
"""

from fastcoder_bench.quality.run import main

__all__ = ["main"]
