"""Cross-file context: what the model sees of the workspace besides the document.

The context goes *before* the document's FIM prompt, in the model's repository format
where it has one (Qwen2.5-Coder was trained with it)::

    <|repo_name|>{workspace folder name}
    <|file_sep|>{path of another file}
    {definitions or chunks of it}
    <|file_sep|>{path of the document}
    <|fim_prefix|>...<|fim_suffix|>...<|fim_middle|>...

(a model without those tokens gets ``# path`` comment lines instead). With the context
off, or nothing chosen for it, the document's header alone still goes first while the
document is nearly empty (``fileHeader``: ``auto`` by default, at most
:data:`HEADER_MAX_LINES` non-empty lines; models with the repository tokens only): the
workspace's name and the document's path tell the model the file's name and language,
which an empty or short document does not (qwen2.5-coder-0.5b answered an empty
``.py`` file with an Angular import without it); in longer documents it made suggestions
a little worse. Sources, each
under its own token budget (the ``contextSources`` setting; all together at most
``maxPromptTokens / 3``, taken from the document's share of the prompt):

* ``definitions``: the declarations (:mod:`indexer.symbols`) of the names the document
  imports from other workspace files, those used nearest the cursor first. Read from
  the workspace index's symbol table, kept by the same watchdog events and editor
  buffers as D_r, so ignored and secret files never reach it;
* ``open``: the chunks of the other open documents most like the lines before the
  cursor (identifier-set Jaccard, as RepoCoder and Continue do);
* ``edits``: the surroundings of the places the user last asked for completions in
  the other open documents (most recent first), as llama.vim's ring of chunks.

Files come grouped and sorted by path, chunks by line, so the text depends on what is
chosen, not on the order it was found in.

**It changes rarely.** A changed context means the document's whole prompt is
prefilled again (its tokens come first), so a document keeps its context
(:class:`ContextState`) across keystrokes and rebuilds it only when

1. a definition in it changed (on disk or in a buffer: the symbol table's version of
   its file moved and its text differs),
2. a name imported from the workspace is used near the cursor and was not considered
   when the context was built (a new import, or a name typed that is now near),
3. the settings, the tokenizer or the document's path changed, or
4. the prompt is prefilled from its start anyway (the document's kept prefix start
   moved): then the context is rebuilt for the cursor's surroundings at no extra cost.

The context's tokens are part of the prompt, so the drafters' prompt lookup (the live
context) sees them as well.
"""

from __future__ import annotations

import logging
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from pygls.uris import to_fs_path

from lsp_server.prompt import CursorContext, encode

log = logging.getLogger(__name__)

WINDOW_BEFORE_LINES = 40
"""Lines before the cursor whose names count as "used near the cursor"."""
WINDOW_AFTER_LINES = 10
SIMILAR_LINES = 20
"""Lines before the cursor that the ``open`` chunks are compared with."""
CHUNK_LINES = 16
CHUNK_STRIDE = 8
MIN_SIMILARITY = 0.05
EDIT_CONTEXT_LINES = 8
"""Lines each side of a recent place (``edits``)."""
MAX_PLACES = 16
MAX_SHARE = 3
"""The context takes at most maxPromptTokens / MAX_SHARE tokens."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Piece:
    """One chunk of another file: ``text`` from line ``line`` (1-based) of ``path``."""

    source: str
    path: str
    line: int
    text: str
    key: str = ""
    """The definition's file key (``definitions``), to tell when it went stale."""
    name: str = ""
    version: int = 0


@dataclass
class ContextState:
    """A document's context, kept across keystrokes (see the module doc)."""

    key: tuple
    ids: list[int]
    text: str
    pieces: list[Piece]
    considered: frozenset[str]
    """Names imported from the workspace that were weighed when it was built."""
    tokens_by_source: dict[str, int] = field(default_factory=dict)
    """Tokens of each source's pieces (without the file headers; in the before-middle
    placement each piece as commented, its own lines included)."""
    placement: str = "first"
    """Where its ids go (:func:`lsp_server.prompt.place_context`): ``first``, or
    ``before-middle`` (the ``contextPlacement`` of a context with pieces)."""

    @property
    def tokens(self) -> int:
        return len(self.ids)


@dataclass
class Place:
    uri: str
    line: int


class RecentPlaces:
    """Where the user last asked for completions, per document (most recent last)."""

    def __init__(self, size: int = MAX_PLACES) -> None:
        self._places: OrderedDict[str, Place] = OrderedDict()
        self.size = size

    def visit(self, uri: str, line: int) -> None:
        self._places.pop(uri, None)
        self._places[uri] = Place(uri, line)
        while len(self._places) > self.size:
            self._places.popitem(last=False)

    def forget(self, uri: str) -> None:
        self._places.pop(uri, None)

    def recent(self) -> list[Place]:
        return list(reversed(self._places.values()))


HEADER_MAX_LINES = 3
"""``fileHeader: auto`` puts the document's header first while the document has at most
this many non-empty lines. Measured (Qwen2.5-Coder-0.5B, next line of real Python,
JavaScript and Markdown files after their first K non-empty lines, 47-48 files,
``docs/bench/probes-s29/file_start.py``): edit similarity with / without the header 0.365 /
0.159 at K = 0 (an empty file), 0.288 / 0.218 at 1, 0.326 / 0.297 at 2, 0.363 / 0.342 at 3,
0.355 / 0.339 at 4 (one exact match fewer), but 0.390 / 0.409 at 5, 0.567 / 0.585 at 20, and
0.349 / 0.372 on the quality benchmark's 200 tasks in long files."""

_NONEMPTY_LINE = re.compile(r"^[ \t]*\S", re.MULTILINE)


def wants_header(setting: Any, ctx: CursorContext) -> bool:
    """Whether the document's header goes first (``fileHeader``): true, false, or ``auto``:
    while the document has at most :data:`HEADER_MAX_LINES` non-empty lines (the model
    knows the file's language from the text itself after that)."""
    if setting != "auto":
        return bool(setting)
    seen = 0
    for text in (ctx.prefix, ctx.suffix):
        for _ in _NONEMPTY_LINE.finditer(text):
            seen += 1
            if seen > HEADER_MAX_LINES:
                return False
    return True


def _lines_around(text: str, line: int, before: int, after: int) -> tuple[int, str]:
    lines = text.split("\n")
    start = max(0, line - before)
    return start + 1, "\n".join(lines[start : line + after + 1])


def _chunks(text: str) -> Iterable[tuple[int, str]]:
    lines = text.split("\n")
    for start in range(0, max(1, len(lines) - CHUNK_LINES + CHUNK_STRIDE), CHUNK_STRIDE):
        chunk = "\n".join(lines[start : start + CHUNK_LINES])
        if chunk.strip():
            yield start + 1, chunk


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


class ContextBuilder:
    """Builds and keeps the documents' cross-file context (model thread)."""

    def __init__(self) -> None:
        self.places = RecentPlaces()
        self._ids: OrderedDict[tuple[int, str], list[int]] = OrderedDict()  # (tokenizer, text) -> ids (LRU)
        self._special_ids: tuple[Any, tuple[int, int] | None] | None = None  # (tokenizer, its repository tokens)

    # ------------------------------------------------------------------ helpers
    def _encode(self, tokenizer: Any, text: str) -> list[int]:
        key = (id(tokenizer), text)  # a reloaded model may bring another tokenizer
        ids = self._ids.get(key)
        if ids is None:
            ids = encode(tokenizer, text)
            self._ids[key] = ids
            if len(self._ids) > 2048:
                self._ids.popitem(last=False)
        else:
            self._ids.move_to_end(key)
        return ids

    def _specials(self, tokenizer: Any) -> tuple[int, int] | None:
        """The repository-format token ids of ``tokenizer`` (None: it has none), kept for the
        last tokenizer asked: ``get_vocab()`` builds the whole vocabulary (17 ms for
        SmolLM2-135M, 75 ms for Qwen2.5-Coder's, 2-vCPU EPYC), and a nearly empty
        document of a model without those tokens asks at every request."""
        if self._special_ids is None or self._special_ids[0] is not tokenizer:
            vocab = tokenizer.get_vocab()
            found = None
            for repo, sep in (("<|repo_name|>", "<|file_sep|>"), ("<repo_name>", "<file_sep>")):
                if repo in vocab and sep in vocab:
                    found = vocab[repo], vocab[sep]
                    break
            self._special_ids = (tokenizer, found)
        return self._special_ids[1]

    # ------------------------------------------------------------------ the state
    def context_for(
        self,
        current: ContextState | None,
        *,
        settings: Any,
        tokenizer: Any,
        index: Any,
        uri: str,
        path: str | None,
        ctx: CursorContext,
        docs: Mapping[str, tuple[Any, str]],
        refresh: bool = False,
        language_id: str | None = None,
    ) -> ContextState | None:
        """The context for the document at ``ctx``: ``current`` while it holds (module
        doc), else a new one. ``refresh``: the prompt is prefilled from its start anyway
        (rebuild for the cursor's surroundings). ``language_id``: the document's, for the
        name a document without a path goes by. None: no context (off, or nothing)."""
        budgets = dict(settings.context_sources) if settings.cross_file_context else {}
        header = wants_header(getattr(settings, "file_header", False), ctx)
        if not budgets and not header:
            return None
        roots = list(getattr(index, "roots", None) or [])
        relpath = _relpath(path, roots) if path else untitled_name(uri, language_id)
        placement = getattr(settings, "context_placement", "first") if budgets else "first"
        key = (tuple(sorted(budgets.items())), settings.max_prompt_tokens, id(tokenizer), relpath, header, placement)
        if not budgets:  # the document's own header alone
            if current is not None and current.key == key:
                return current
            return self._header_only(key, tokenizer, relpath, roots)
        symbols = _symbols(index)
        wanted = self._wanted(symbols, path, relpath, ctx) if "definitions" in budgets else {}
        if current is not None and current.key == key and not refresh:
            if not self._stale(current, symbols) and set(wanted) <= current.considered:
                return current
        return self._build(key, budgets, settings, tokenizer, index, symbols, uri, path, relpath, roots, ctx, docs, wanted)

    def _stale(self, state: ContextState, symbols: Any) -> bool:
        for p in state.pieces:
            if p.source != "definitions" or symbols is None or symbols.version(p.key) == p.version:
                continue
            now = next((d for d in symbols.definitions(p.key) if d.name == p.name), None)
            if now is None or now.text != p.text:
                return True
        return False

    # ------------------------------------------------------------------ sources
    def _wanted(self, symbols: Any, path: str | None, relpath: str, ctx: CursorContext) -> dict[str, Any]:
        """name -> definition, for the names the document imports from other workspace
        files, ordered by how near the cursor they are used (nearest first; names not
        used near the cursor follow in import order)."""
        if symbols is None:
            return {}
        from indexer.symbols import absolute_module, imports_of

        text = ctx.prefix + ctx.suffix
        found: dict[str, Any] = {}
        modules: dict[str, str] = {}  # local alias -> module, for ``alias.name`` uses
        for imp in imports_of(text):
            module = absolute_module(imp.module, relpath)
            if imp.name is None:
                modules[imp.local] = module
                continue
            sub = f"{module}.{imp.name}" if module else imp.name
            if symbols.module_key(sub) is not None:  # from pkg import module
                modules[imp.local] = sub
                continue
            d = symbols.resolve(module, imp.name)
            if d is not None and d.key != path:
                found.setdefault(imp.local, d)
        # rsplit/split with a cap: only the window's lines, not the whole document's
        before = ctx.prefix.rsplit("\n", WINDOW_BEFORE_LINES)[-WINDOW_BEFORE_LINES:]
        after = ctx.suffix.split("\n", WINDOW_AFTER_LINES)[:WINDOW_AFTER_LINES]
        window = "\n".join(before + after)
        cursor = len("\n".join(before))
        distance: dict[str, int] = {}
        for m in _IDENT.finditer(window):
            if m.group(0) in found:
                distance[m.group(0)] = min(distance.get(m.group(0), 1 << 30), abs(m.start() - cursor))
        for m in _ATTR.finditer(window):
            module = modules.get(m.group(1))
            if module is None:
                continue
            d = symbols.resolve(module, m.group(2))
            if d is not None and d.key != path:
                name = f"{m.group(1)}.{m.group(2)}"
                found.setdefault(name, d)
                distance[name] = min(distance.get(name, 1 << 30), abs(m.start() - cursor))
        order = sorted(found, key=lambda n: (n not in distance, distance.get(n, 0)))
        return {n: found[n] for n in order}

    def _definitions(self, wanted: dict[str, Any], symbols: Any) -> list[Piece]:
        out, seen = [], set()
        for name, d in wanted.items():
            if (d.key, d.name) in seen:
                continue
            seen.add((d.key, d.name))
            out.append(Piece("definitions", d.relpath, d.line, d.text, d.key, d.name, symbols.version(d.key)))
        return out

    def _open(self, uri: str, ctx: CursorContext, docs: Mapping[str, tuple[Any, str]], index: Any, roots: list) -> list[Piece]:
        probe = set(_IDENT.findall("\n".join(ctx.prefix.rsplit("\n", SIMILAR_LINES)[-SIMILAR_LINES:])))
        scored = []
        for other, (_, text) in docs.items():
            path = _admitted(other, index)
            if other == uri or path is None:
                continue
            rel = _relpath(path, roots)
            for line, chunk in _chunks(text):
                score = jaccard(probe, set(_IDENT.findall(chunk)))
                if score >= MIN_SIMILARITY:
                    scored.append((-score, rel, line, chunk))
        scored.sort()
        return [Piece("open", rel, line, chunk) for _, rel, line, chunk in scored]

    def _edits(self, uri: str, docs: Mapping[str, tuple[Any, str]], index: Any, roots: list) -> list[Piece]:
        out = []
        for place in self.places.recent():
            if place.uri == uri or place.uri not in docs:
                continue
            path = _admitted(place.uri, index)
            if path is None:
                continue
            line, text = _lines_around(docs[place.uri][1], place.line, EDIT_CONTEXT_LINES, EDIT_CONTEXT_LINES)
            if text.strip():
                out.append(Piece("edits", _relpath(path, roots), line, text))
        return out

    # ------------------------------------------------------------------ building
    def _build(self, key, budgets, settings, tokenizer, index, symbols, uri, path, relpath, roots, ctx, docs, wanted):
        candidates: dict[str, list[Piece]] = {}
        if "definitions" in budgets:
            candidates["definitions"] = self._definitions(wanted, symbols)
        if "open" in budgets:
            candidates["open"] = self._open(uri, ctx, docs, index, roots)
        if "edits" in budgets:
            candidates["edits"] = self._edits(uri, docs, index, roots)
        total = settings.max_prompt_tokens // MAX_SHARE
        comments = key[-1] == "before-middle"  # commented fragments: count them as rendered
        room = total - (len(self._encode(tokenizer, COMMENT_HEADER)) if comments else 0)
        chosen: list[Piece] = []
        used: dict[str, int] = {}
        spans: list[tuple[str, int, int]] = []
        for source in ("definitions", "edits", "open"):  # the most specific first
            budget = budgets.get(source, 0)
            for piece in candidates.get(source, []):
                end = piece.line + piece.text.count("\n")
                if any(p == piece.path and s <= end and piece.line <= e for p, s, e in spans):
                    continue  # already shown by another piece
                cost = len(self._encode(tokenizer, _commented(piece) if comments else piece.text + "\n")) + 1
                if used.get(source, 0) + cost > budget or sum(used.values()) + cost > room:
                    continue
                used[source] = used.get(source, 0) + cost
                chosen.append(piece)
                spans.append((piece.path, piece.line, end))
        if not chosen:
            if key[-2] and not comments:  # fileHeader: the document's header still goes first
                return self._header_only(key, tokenizer, relpath, roots, frozenset(wanted))
            return ContextState(key, [], "", [], frozenset(wanted), placement=key[-1])
        render = self._render_comments if comments else self._render
        ids, text = render(tokenizer, chosen, relpath, roots)
        if len(ids) > total:  # headers pushed it over: drop the last pieces until it fits
            while chosen and len(ids) > total:
                chosen.pop()
                ids, text = render(tokenizer, chosen, relpath, roots) if chosen else ([], "")
        kept = {p.source for p in chosen}
        return ContextState(key, ids, text, chosen, frozenset(wanted), {s: n for s, n in used.items() if s in kept}, key[-1])

    def _header_only(self, key: tuple, tokenizer: Any, relpath: str, roots: list,
                     considered: frozenset[str] = frozenset()) -> ContextState | None:  # fmt: skip
        """The document's header alone (``fileHeader``): the workspace's name and the
        document's path in the repository format, before the FIM prompt; None for a model
        without those tokens (a ``# path`` comment would not be a comment in every
        language)."""
        if self._specials(tokenizer) is None:
            return None
        ids, text = self._render(tokenizer, [], relpath, roots)
        return ContextState(key, ids, text, [], considered, {}, "first")

    def _render(self, tokenizer: Any, pieces: list[Piece], relpath: str, roots: list) -> tuple[list[int], str]:
        """Token ids and text of the pieces grouped by file (sorted by path, then line)."""
        files: dict[str, list[Piece]] = {}
        for p in sorted(pieces, key=lambda p: (p.path, p.line)):
            files.setdefault(p.path, []).append(p)
        specials = self._specials(tokenizer)
        ids: list[int] = []
        parts: list[str] = []
        repo = os.path.basename(str(roots[0]).rstrip("/\\")) if roots else "workspace"
        if specials is not None:
            ids += [specials[0], *self._encode(tokenizer, repo + "\n")]
            parts.append(f"<repo_name>{repo}\n")
        for path, group in files.items():
            body = "\n...\n".join(p.text for p in group) + "\n"
            if specials is not None:
                ids += [specials[1], *self._encode(tokenizer, f"{path}\n"), *self._encode(tokenizer, body)]
                parts.append(f"<file_sep>{path}\n{body}")
            else:
                head = f"# {path}\n"
                ids += self._encode(tokenizer, head) + self._encode(tokenizer, body + "\n")
                parts.append(head + body + "\n")
        if specials is not None:
            ids += [specials[1], *self._encode(tokenizer, f"{relpath}\n")]
            parts.append(f"<file_sep>{relpath}\n")
        return ids, "".join(parts)

    def _render_comments(self, tokenizer: Any, pieces: list[Piece], relpath: str, roots: list) -> tuple[list[int], str]:
        """The pieces as commented code fragments (CrossCodeEval's cross-file context
        format), for ``contextPlacement: before-middle``: the text goes after the
        suffix, where the model reads code, not the repository's file layout."""
        text = COMMENT_HEADER + "".join(_commented(p) for p in sorted(pieces, key=lambda p: (p.path, p.line)))
        return self._encode(tokenizer, text), text


_RULE = "# " + "-" * 50 + "\n"
COMMENT_HEADER = "\n\n# Here are some relevant code fragments from other files of the repo:\n" + _RULE
"""The start of the context in the ``before-middle`` placement (CrossCodeEval's words)."""


def _commented(piece: Piece) -> str:
    """One piece as CrossCodeEval writes a cross-file fragment: where it is from, then
    its lines behind ``# ``."""
    body = "".join(f"# {line}\n" if line else "#\n" for line in piece.text.split("\n"))
    return f"# the below code fragment can be found in:\n# {piece.path}\n{_RULE}{body}{_RULE}"


# ---------------------------------------------------------------------------- paths


def _symbols(index: Any) -> Any:
    """The workspace's symbol table (switched on by this first use: it is read in the
    background, so the first requests may find it still filling)."""
    ws = getattr(index, "workspace", None)
    use = getattr(ws, "use_symbols", None)
    return use() if use is not None else None


def _relpath(path: str, roots: list) -> str:
    for r in sorted((str(r) for r in roots), key=len, reverse=True):
        if path == r or path.startswith(r.rstrip(os.sep) + os.sep):
            return Path(path).relative_to(r).as_posix()
    return Path(path).name


LANGUAGE_EXTENSIONS = {
    "python": ".py", "javascript": ".js", "javascriptreact": ".jsx", "typescript": ".ts",
    "typescriptreact": ".tsx", "go": ".go", "rust": ".rs", "java": ".java", "kotlin": ".kt",
    "c": ".c", "cpp": ".cpp", "csharp": ".cs", "ruby": ".rb", "php": ".php", "lua": ".lua",
    "swift": ".swift", "scala": ".scala", "shellscript": ".sh", "sh": ".sh", "html": ".html",
    "css": ".css", "scss": ".scss", "json": ".json", "yaml": ".yaml", "toml": ".toml",
    "markdown": ".md", "sql": ".sql", "dockerfile": "Dockerfile", "makefile": "Makefile",
}  # fmt: skip
"""An LSP ``languageId`` -> the file-name ending a document of it gets in the header when
it has no path (an untitled buffer): the model then still knows its language."""


def untitled_name(uri: str, language_id: str | None) -> str:
    """The name a document without a file path goes by in the prompt: the last part of its
    URI, with the ending of its language (``untitled:Untitled-1``, python ->
    ``Untitled-1.py``)."""
    name = uri.split("#", 1)[0].split("?", 1)[0].rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "untitled"
    ending = LANGUAGE_EXTENSIONS.get((language_id or "").lower(), "")
    if ending and not ending.startswith("."):
        return ending  # a file known by its whole name
    return name if not ending or name.lower().endswith(ending) else name + ending


def fs_path(uri: str) -> str | None:
    """The file path of a document URI (None: not a file)."""
    try:
        return to_fs_path(uri) or None
    except Exception:
        return None


def _admitted(uri: str, index: Any) -> str | None:
    """The file path of an open document whose text may go into the prompt, or None:
    inside the workspace the index's filter decides (ignored and secret files are
    out); outside it, a source file whose name is not a secret's."""
    from indexer.scan import is_secret_name, is_source_name

    path = fs_path(uri)
    if not path:
        return None
    ws = getattr(index, "workspace", None)
    if ws is not None:
        inside = ws.admits(path)
        if inside is not None:
            return path if inside else None
    name = os.path.basename(path)
    return path if is_source_name(name) and not is_secret_name(name) else None
