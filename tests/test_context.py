"""Cross-file context (lsp_server/context.py) over the symbol table (indexer/symbols.py):
real files, the real workspace index with real watchdog events, the test tokenizer."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from indexer.symbols import SymbolTable, absolute_module, imports_of, python_definitions
from indexer.workspace import WorkspaceIndex
from lsp_server.context import HEADER_MAX_LINES, ContextBuilder
from fastcoder.models.load import FimTokens
from lsp_server.prompt import CursorContext, place_context
from lsp_server.settings import ServerSettings, SettingsError

CORE = '''\
class Thing:
    """A thing with a size."""
    size: int = 3

    def __init__(self, name):
        self.name = name

    def grow(self, n):
        total = 0
        for i in range(n):
            total += i
        return total


def helper(x, y=2):
    """Add two numbers."""
    return x + y


def unused_elsewhere():
    return 1
'''

USER_HEAD = '''\
from pkg import helper
from .core import Thing
import pkg.core as core


def main():
    t = Thing("a")
    '''
USER_TAIL = "return helper(1)\n"


def test_definitions_are_declarations():
    defs = {d.name: d for d in python_definitions(CORE, "k", "pkg/core.py")}
    assert set(defs) == {"Thing", "helper", "unused_elsewhere"}
    assert defs["helper"].text.startswith("def helper(x, y=2):") and "return x + y" in defs["helper"].text
    thing = defs["Thing"].text
    assert "size: int = 3" in thing and "def __init__(self, name):" in thing and "def grow(self, n):" in thing
    assert "total += i" not in thing  # methods are signatures only
    assert python_definitions("def broken(:\n", "k", "x.py") is None
    # a docstring of blanks only (matplotlib's scale.py): it crashed the whole index's opening
    blank = 'class Scale:\n    def __init__(self, axis):\n        """\n        """\n        self.axis = axis\n'
    assert python_definitions(blank, "k", "scale.py")[0].text.startswith("class Scale:")


def test_a_class_shows_its_fields_as_code_that_parses():
    src = 'class C:\n    __slots__ = (\n        "a",\n        "b",\n        "c",\n        "d",\n    )\n    x: int = (\n        1)\n    def f(self):\n        return 1\n'
    text = python_definitions(src, "k", "c.py")[0].text
    assert "__slots__ = ..." in text and "x: int = (\n        1)" in text
    ast.parse(text)  # a multi-line value cut after its first line would not
    top = {d.name: d.text for d in python_definitions("x = st.recursive(\n    a,\n    b,\n    c,\n    d,\n)\ny = f(\n    1)\n", "k", "m.py")}
    assert top == {"x": "x = ...", "y": "y = f(\n    1)"}
    assert python_definitions("é = f(\n 1,\n 2,\n 3,\n 4)\n", "k", "m.py")[0].text == "é = ..."  # byte offsets


def test_imports_are_read_from_broken_code():
    text = "from .core import (Thing,\n  helper as h)\nimport pkg.core as core, os\nfrom ..up import x\ndef f(:\n"
    got = {(i.local, i.module, i.name) for i in imports_of(text)}
    assert ("Thing", ".core", "Thing") in got and ("h", ".core", "helper") in got
    assert ("core", "pkg.core", None) in got and ("os", "os", None) in got and ("x", "..up", "x") in got
    assert absolute_module(".core", "pkg/user.py") == "pkg.core"
    assert absolute_module("..up", "pkg/sub/m.py") == "pkg.up"


def test_re_exports_resolve_through_the_package():
    table = SymbolTable()
    table.update("/r/pkg/core.py", "pkg/core.py", CORE)
    table.update("/r/pkg/__init__.py", "pkg/__init__.py", "from .core import helper\n")
    d = table.resolve("pkg", "helper")
    assert d is not None and d.relpath == "pkg/core.py"
    assert table.resolve("pkg", "nothing") is None
    # an alias (attrs' ``ib = attr = attrib``) resolves to what it names
    table.update("/r/pkg/api.py", "pkg/api.py", "from .core import helper\nassist = aid = helper\n")
    d = table.resolve("pkg.api", "aid")
    assert d is not None and d.name == "helper" and d.text.startswith("def helper(")


def _project(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("from .core import helper\n")
    (root / "pkg" / "core.py").write_text(CORE)
    (root / "pkg" / "user.py").write_text(USER_HEAD + USER_TAIL)


class _Index:
    """What the server's index adapter offers the context builder."""

    def __init__(self, ws: WorkspaceIndex, root: Path) -> None:
        self.workspace, self.roots = ws, [root]


@pytest.fixture
def workspace(tmp_path, tiny_tokenizer):
    _project(tmp_path)
    ws = WorkspaceIndex([tmp_path], tiny_tokenizer, persist=False, debounce_s=0.05, max_delay_s=0.2)
    ws.start()
    assert ws.wait_ready(60)
    assert ws.symbols.definitions(str(tmp_path / "pkg" / "core.py")) == []  # read only once used
    ws.use_symbols()
    ws.flush()  # after the symbol pass the first use started
    assert ws.symbols.definitions(str(tmp_path / "pkg" / "core.py"))
    yield ws, _Index(ws, tmp_path)
    ws.stop(save=False)


ON = ServerSettings().merged({"crossFileContext": True})


def _context(builder, current, index, root, tok, settings=None, docs=None, ctx=None):
    path = root / "pkg" / "user.py"
    return builder.context_for(
        current, settings=settings or ON, tokenizer=tok, index=index, uri=path.as_uri(),
        path=str(path), ctx=ctx or CursorContext(USER_HEAD, USER_TAIL), docs=docs or {},
    )  # fmt: skip


def _wait_for(fn, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.05)
    return fn()


def test_context_holds_the_definitions_used_near_the_cursor(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    builder = ContextBuilder()
    state = _context(builder, None, index, tmp_path, tiny_tokenizer)
    assert state is not None and state.tokens > 0
    assert "# pkg/core.py" in state.text and "def helper(x, y=2):" in state.text and "class Thing:" in state.text
    assert "unused_elsewhere" not in state.text  # not imported by the document
    assert {"helper", "Thing"} <= state.considered
    # unchanged: the very same state (its tokens stay in the document's KV cache)
    assert _context(builder, state, index, tmp_path, tiny_tokenizer) is state
    # off
    assert _context(builder, state, index, tmp_path, tiny_tokenizer, ServerSettings()) is None  # off by default


def test_context_is_rebuilt_when_a_definition_changes_on_disk(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    builder = ContextBuilder()
    state = _context(builder, None, index, tmp_path, tiny_tokenizer)
    assert "def helper(x, y=2):" in state.text
    # a real file event (watchdog), not a call into the index
    (tmp_path / "pkg" / "core.py").write_text(CORE.replace("def helper(x, y=2):", "def helper(x, y=2, *, scale=10):"))
    new = _wait_for(lambda: (s := _context(builder, state, index, tmp_path, tiny_tokenizer)) is not state and s)
    assert new and "def helper(x, y=2, *, scale=10):" in new.text
    # a change elsewhere in the file that no chosen definition shows keeps the state
    (tmp_path / "pkg" / "core.py").write_text(
        CORE.replace("def helper(x, y=2):", "def helper(x, y=2, *, scale=10):") + "\n\ndef other():\n    return 2\n"
    )
    ws.flush()
    _wait_for(lambda: any(d.name == "other" for d in ws.symbols.definitions(str(tmp_path / "pkg" / "core.py"))))
    assert _context(builder, new, index, tmp_path, tiny_tokenizer) is new


def test_context_is_rebuilt_when_a_definition_changes_in_an_open_buffer(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    builder = ContextBuilder()
    state = _context(builder, None, index, tmp_path, tiny_tokenizer)
    ws.update_buffer(tmp_path / "pkg" / "core.py", CORE.replace("return x + y", "return x * y"))
    new = _wait_for(lambda: (s := _context(builder, state, index, tmp_path, tiny_tokenizer)) is not state and s)
    assert new and "return x * y" in new.text and "return x + y" not in new.text


def test_a_new_import_used_near_the_cursor_rebuilds(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    builder = ContextBuilder()
    state = _context(builder, None, index, tmp_path, tiny_tokenizer)
    head = "from pkg.core import unused_elsewhere\n" + USER_HEAD + "unused_elsewhere("
    new = _context(builder, state, index, tmp_path, tiny_tokenizer, ctx=CursorContext(head, ")\n"))
    assert new is not state and "def unused_elsewhere():" in new.text


def test_secrets_and_ignored_files_never_reach_the_context(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "generated").mkdir()
    secret_words = "Thing helper main grow size name"
    (tmp_path / "generated" / "gen.py").write_text(f"def leaked():\n    return '{secret_words} IGNORED'\n")
    (tmp_path / ".env").write_text(f"TOKEN=supersecret  # {secret_words}\n")
    (tmp_path / "pkg" / "user.py").write_text("from generated.gen import leaked\n" + USER_HEAD + USER_TAIL)
    time.sleep(0.5)
    ws.flush()
    builder = ContextBuilder()
    docs = {
        (tmp_path / ".env").as_uri(): (1, (tmp_path / ".env").read_text()),
        (tmp_path / "generated" / "gen.py").as_uri(): (1, (tmp_path / "generated" / "gen.py").read_text()),
        (tmp_path / "pkg" / "core.py").as_uri(): (1, CORE),
    }
    head = "from generated.gen import leaked\n" + USER_HEAD + "leaked()\n    t.grow(size)\n    "
    state = _context(builder, None, index, tmp_path, tiny_tokenizer, docs=docs, ctx=CursorContext(head, ""))
    assert state is not None and state.text
    assert "supersecret" not in state.text and "IGNORED" not in state.text and "leaked" not in state.text
    assert "# pkg/core.py" in state.text  # the open, admitted document does


def test_each_source_stays_in_its_budget_and_the_whole_in_a_third_of_the_prompt(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    builder = ContextBuilder()
    docs = {(tmp_path / "pkg" / f"big{i}.py").as_uri(): (1, CORE * 4) for i in range(3)}
    for budgets, cap in (({"definitions": 40}, 40), ({"open": 100}, 100), ({"definitions": 400, "open": 400}, 150)):
        settings = ON.merged({"contextSources": budgets, "maxPromptTokens": 450})
        state = _context(builder, None, index, tmp_path, tiny_tokenizer, settings=settings, docs=docs)
        assert state is not None and state.tokens > 0
        assert sum(state.tokens_by_source.values()) <= min(cap, 450 // 3)  # the pieces, in their budgets
        assert state.tokens <= 450 // 3  # headers included, within a third of the prompt
    with pytest.raises(SettingsError):
        ServerSettings().merged({"contextSources": {"everything": 10}})


def test_before_middle_puts_commented_fragments_after_the_suffix(workspace, tmp_path, tiny_tokenizer):
    ws, index = workspace
    builder = ContextBuilder()
    first = _context(builder, None, index, tmp_path, tiny_tokenizer)
    settings = ON.merged({"contextPlacement": "before-middle"})
    state = _context(builder, first, index, tmp_path, tiny_tokenizer, settings=settings)
    assert state is not first  # another placement is another context
    assert "<repo_name>" not in state.text and "# pkg/core.py" in state.text
    assert "# def helper(x, y=2):" in state.text  # the code, commented out
    assert all(line.startswith("#") for line in state.text.strip("\n").split("\n"))
    assert state.tokens <= settings.max_prompt_tokens // 3
    # in the model's input: after the suffix, right before the middle token
    fim = FimTokens("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
    middle = tiny_tokenizer.convert_tokens_to_ids("<|fim_middle|>")
    prompt = [20, 21, 22, middle, 23, 24]
    ctx = [30, 31]
    assert place_context(ctx, prompt, "before-middle", fim, tiny_tokenizer) == [20, 21, 22, 30, 31, middle, 23, 24]
    assert place_context(ctx, prompt, "first", fim, tiny_tokenizer) == [30, 31, *prompt]
    assert place_context(ctx, prompt, "before-middle", None, tiny_tokenizer) == [30, 31, *prompt]  # no FIM: first
    assert place_context([], prompt, "before-middle", fim, tiny_tokenizer) == prompt
    with pytest.raises(SettingsError):
        ServerSettings().merged({"contextPlacement": "last"})


def test_the_document_header_goes_first_without_cross_file_context(workspace, tmp_path, repo_tokenizer, tiny_tokenizer):
    """fileHeader: with the cross-file context off, the prompt can still start with the
    workspace's name and the document's path in the repository format (so the model knows
    the file's name and language: an empty ``.py`` file got an Angular import from
    qwen2.5-coder-0.5b without it); the same state across keystrokes (its tokens stay in
    the KV cache); nothing for a tokenizer without the repository tokens. ``auto`` (the
    default): only while the document has at most HEADER_MAX_LINES non-empty lines."""
    ws, index = workspace
    builder = ContextBuilder()
    on = ServerSettings().merged({"fileHeader": True})
    state = _context(builder, None, index, tmp_path, repo_tokenizer, settings=on)
    assert state is not None and state.pieces == [] and state.placement == "first"
    assert state.text == f"<repo_name>{tmp_path.name}\n<file_sep>pkg/user.py\n"
    repo_id, sep_id = repo_tokenizer.convert_tokens_to_ids(["<|repo_name|>", "<|file_sep|>"])
    assert state.ids[0] == repo_id and state.ids.count(sep_id) == 1
    assert repo_tokenizer.decode(state.ids) == f"<|repo_name|>{tmp_path.name}\n<|file_sep|>pkg/user.py\n"
    # another keystroke, another cursor: the very same state
    moved = CursorContext(USER_HEAD + "x = 1\n    ", USER_TAIL)
    assert _context(builder, state, index, tmp_path, repo_tokenizer, settings=on, ctx=moved) is state
    # off, or a model without the tokens: no header
    off = on.merged({"fileHeader": False})
    assert _context(builder, state, index, tmp_path, repo_tokenizer, settings=off) is None
    assert _context(builder, None, index, tmp_path, tiny_tokenizer, settings=on) is None
    with pytest.raises(SettingsError):
        on.merged({"fileHeader": "yes"})
    # auto (the default): a nearly empty document gets it, one with more lines does not
    auto = ServerSettings()
    assert auto.file_header == "auto" and HEADER_MAX_LINES == 3
    for prefix, suffix, wanted in (("", "", True), ("import os\n\n", "", True), ("a\n\n  b\n", "\nc\n", True),
                                   ("a\nb\n", "c\nd\n", False), (USER_HEAD, USER_TAIL, False)):  # fmt: skip
        got = _context(builder, None, index, tmp_path, repo_tokenizer, settings=auto, ctx=CursorContext(prefix, suffix))
        assert (got is not None and got.text == state.text) if wanted else got is None, (prefix, suffix)
    # the context on but nothing to put in it: the header alone, first; in the before-middle
    # placement (commented fragments, no repository format) nothing
    empty = on.merged({"crossFileContext": True, "contextSources": {"open": 192}})
    alone = _context(builder, None, index, tmp_path, repo_tokenizer, settings=empty)
    assert alone.text == state.text and alone.placement == "first"
    middle = _context(builder, None, index, tmp_path, repo_tokenizer, settings=empty.merged({"contextPlacement": "before-middle"}))
    assert middle.ids == [] and middle.placement == "before-middle"
    # with definitions in it, the header closes the context, right before the document
    full = _context(builder, None, index, tmp_path, repo_tokenizer, settings=ON)
    assert full.pieces and full.text.startswith(f"<repo_name>{tmp_path.name}\n<file_sep>pkg/core.py\n")
    assert full.text.endswith("<file_sep>pkg/user.py\n")


def test_an_untitled_document_goes_by_a_name_with_its_languages_ending(workspace, tmp_path, repo_tokenizer):
    """A buffer without a file (VS Code's untitled documents) gets a name from its URI and
    the ending of its ``languageId``, so the header still tells the model the language."""
    _, index = workspace
    builder = ContextBuilder()

    def header(uri, language):
        state = builder.context_for(None, settings=ServerSettings(), tokenizer=repo_tokenizer, index=index, uri=uri,  # auto: empty
                                    path=None, ctx=CursorContext("", ""), docs={}, language_id=language)  # fmt: skip
        return state.text.rsplit("<file_sep>", 1)[1]

    assert header("untitled:Untitled-1", "python") == "Untitled-1.py\n"
    assert header("untitled:Untitled-2", "typescriptreact") == "Untitled-2.tsx\n"
    assert header("untitled:notes.md", "markdown") == "notes.md\n"  # already named so
    assert header("untitled:Untitled-3", "dockerfile") == "Dockerfile\n"
    assert header("untitled:Untitled-4", "unknown-language") == "Untitled-4\n"
    assert header("vscode-notebook-cell:/nb/a.ipynb#W0sZmlsZQ%3D%3D", "python") == "a.ipynb.py\n"
