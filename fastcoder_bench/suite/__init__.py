"""`fastcoder bench`: side-by-side benchmark of AR, prompt lookup, REST and FastCoder.

Modules: :mod:`.tasks` (tasks, function selection, masking, task files),
:mod:`.projects` (pinned PyPI projects as sdists), :mod:`.repo` (a repository's files
and D_r without the answer), :mod:`.humaneval`, :mod:`.variants` (methods and
ablations), :mod:`.runner` (the harness), :mod:`.report`, :mod:`.plots`,
:mod:`.simulate` (offline replay of drafters), :mod:`.cli`.
"""
