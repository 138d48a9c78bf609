"""The server's index adapter wires D_d (the environment's dependencies) as a third source."""

import time

from lsp_server.workspace import IndexAdapter


def test_dependency_index_is_a_source_and_a_broken_env_does_not_crash(tmp_path, tiny_tokenizer):
    (tmp_path / "a.py").write_text("def f(x):\n    return x\n")
    idx = IndexAdapter(
        tiny_tokenizer, [tmp_path], lambda *a: None, lambda *a: None,
        use_common=False, use_deps=True, python=str(tmp_path / "no-such-python"),
        deps_options={"fallback": None},  # no falling back to the test runner's own venv
    )  # fmt: skip
    idx.start()
    deadline = time.time() + 60
    while idx.deps is None and time.time() < deadline:
        time.sleep(0.05)
    assert idx.deps is not None
    src = idx.sources()
    assert src.dd is idx.deps.source
    # usable at once (empty until its build finishes), never raises
    assert src.dd.retrieve([1, 2, 3], n_max=16, n_min=2, max_nodes=8, max_depth=4).match_len >= 0
    deadline = time.time() + 60
    while idx.deps.status in ("idle", "building") and time.time() < deadline:
        time.sleep(0.05)
    assert idx.deps.status == "empty"  # no usable environment: an empty D_d, no crash
    idx.close()
