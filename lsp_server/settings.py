"""Server configuration: one :class:`ServerSettings` object.

Where values come from, later ones winning:

1. the defaults below;
2. ``fastcoder serve`` command-line options (``--model``, ``--dtype``, ``--device``, ``--method``);
3. ``initializationOptions`` of the ``initialize`` request (camelCase keys);
4. ``workspace/didChangeConfiguration`` with ``{"settings": {"fastcoder": {...}}}``.

Keys (camelCase on the wire):

================== ============================ =====================================================
key                default                      meaning
================== ============================ =====================================================
model              ``qwen2.5-coder-0.5b``       builtin name, local HF folder, .gguf file or hub id
dtype              ``auto``                     auto, float32, bfloat16
device             ``auto``                     auto, cpu, cuda, cuda:N
packWeights        ``auto``                     CPU: pack the linear weights for oneDNN (auto: where a
                                                probe at load measured it faster; on, off; packed, q/k/v
                                                and gate/up run as one matmul each). With dtype
                                                auto the same probe keeps bfloat16 only where it pays
                                                (fastcoder/matmul.py)
explicitAttention  ``off``                      CPU bfloat16: compute attention as two matrix products
                                                (float32 scores) from the width where a probe at load
                                                found it batch-invariant and faster than PyTorch's
                                                SDPA kernel (auto), or never (off: measured no faster
                                                end to end on this project's CPUs; fastcoder/attention.py)
method             ``fastcoder``                ar, pld, rest, fastcoder, reuse (the drafter)
arFallback         true                         run plain AR for a document while its drafter is
                                                measured slower than AR would have been on the same
                                                tokens (same output; lsp_server/fallback.py)
maxNewTokens       128                          cap on tokens of one completion
timeBudgetMs       2000                         stop a completion after this long of decoding, counted
                                                after the prompt's prefill (null/0: no limit)
enabled            true                         false: every completion request answers empty
pythonPath         ``""``                       interpreter the client started us with (informative)
maxPromptTokens    2048                         context window given to the model
suffixShare        0.25                         share of maxPromptTokens for the text after the cursor
maxSuffixTokens    128                          cap on the suffix: in a FIM prompt the suffix follows the
                                                cursor, so every keystroke prefills it again (measured on
                                                this CPU, bf16: ~250 ms for 128 tokens, ~900 ms for 512)
maxBodyTokens      256                          cap for "Generate function body"
bodyTimeBudgetMs   30000                        time limit for it (null/0: none); a cut body keeps whole lines
maxEditTokens      4096                         the largest selection ``fastcoder.editSelection`` takes, in
                                                tokens: the model reads it whole and writes it again (up to
                                                8x + 256 tokens); a larger one fails at once, saying its size
reuseSuggestions   true                         answer from the last suggestion when the user typed
                                                exactly what it proposed (no model call)
midLineBlocks      false                        with code before the cursor and none after it, the
                                                suggestion ends at its line unless that line opens a block
                                                (ends with ``:``, ``{``, ``[``, ``(``); a comment or
                                                docstring being typed, and a suggestion that starts with
                                                a line break, keep the block rules; true: it may run on
                                                past its line as on an empty line
earlyAnswerMs      0                            multi-line mode: once this long has passed, answer at the
                                                next line end with the lines so far (0: at the first line's
                                                end); the block goes on in the background and is offered as
                                                the user types through it or accepts (null: wait for the
                                                block's end or timeBudgetMs)
warmOnOpen         true                         prefill an opened document in the background (when the
                                                model is idle), so the first completion in it is fast
warmAtCursor       true                         when the client says where the cursor rests
                                                (fastcoder/cursor), compute the suggestion there in the
                                                background (lowest priority, as prefetch): its prompt is
                                                prefilled before the first keystroke there
prepareWindow      ``auto``                     in a document longer than the prompt window, prefill
                                                the window's next start in idle time (lowest priority,
                                                in small chunks) into a spare KV cache, so the window's
                                                move (once per ~150-270 typed tokens) prefills only what
                                                was typed since instead of the whole prompt. auto: only
                                                with prefetch off (in live typing the background
                                                suggestion already prefilled the moved window in the
                                                user's pauses: docs/bench/live-s19-window); true, false
workspaceIndex     true                         use D_r, the index of the workspace folders
commonIndex        true                         use D_c, the standard library (built once per tokenizer)
dependencyIndex    false                        use D_d, the workspace environment's site-packages
                                                (.venv/, venv/ or pythonPath; built in the background,
                                                tens of millions of tokens: opt-in)
engine             ``{}``                       any :class:`fastcoder.config.DecodeConfig` field
kvCacheMb          256                          memory for the KV caches of open documents (the most
                                                recently used keep theirs, at most 8 documents)
kvDiskMb           512                          CPU: disk for open documents' KV caches kept between
                                                runs (written when a document closes, when kvCacheMb
                                                evicts its cache and at shutdown; read when it opens
                                                again or its evicted cache is needed: a reopened file's first
                                                completion prefills only what changed since; under
                                                the cache folder's kv/, least recently used first;
                                                fastcoder/kv_disk.py). 0: off
promptLayout       ``anchored``                 anchored: the prompt ends with the text typed since an
                                                anchor (the start of the line), the last typed token
                                                taken back and healed, so typing only extends the
                                                prompt (a few tokens prefilled per keystroke); psm:
                                                prefix, suffix, middle (the suffix is prefilled again
                                                at every keystroke). See lsp_server/prompt.py
debounceMs         ``auto``                     wait before running the model for a request until the
                                                document has been still this many ms (0: none); auto:
                                                50 ms, VS Code's own inline debounce (a request from
                                                VS Code starts at once; measured in live typing, see
                                                lsp_server/complete.py AUTO_DEBOUNCE_S)
prefetch           true                         when a suggestion is shown and the model is idle,
                                                compute the one after accepting it (and its first
                                                line) in the background; any request cancels it
crossFileContext   false                        put other workspace files in the prompt, before the
                                                document, in the model's repository format (Qwen2.5-
                                                Coder: <|repo_name|>, <|file_sep|>); see
                                                lsp_server/context.py. Off by default: with
                                                qwen2.5-coder-0.5b it lowered exact match and edit
                                                similarity in `fastcoder bench quality` (README)
fileHeader         ``auto``                     start the prompt with the workspace's name and the
                                                document's path in the model's repository format
                                                (<|repo_name|>, <|file_sep|>), so the model knows the
                                                file's name and language (an empty .py file got an
                                                Angular import from qwen2.5-coder-0.5b without it).
                                                auto: while the document has at most 3 non-empty
                                                lines (in longer files it made suggestions a little
                                                worse); true, false. Cached with the prompt; models
                                                without those tokens: none. lsp_server/context.py
contextSources     ``{"definitions": 384,       token budget per context source (0 or absent: off):
                   "open": 192, "edits": 128}`` definitions: declarations of the names the document
                                                imports from other workspace files, those used near
                                                the cursor first; open: the chunks of the other open
                                                documents most like the text before the cursor;
                                                edits: the places last completed at in the other open
                                                documents. In all at most maxPromptTokens / 3
contextPlacement   ``first``                    where the context goes: first: before the document's
                                                FIM prompt, in the repository format above (cached
                                                across every keystroke and line); before-middle:
                                                after the suffix, right before <|fim_middle|>, as
                                                commented code fragments (the placement of Qwen2.5-
                                                Coder's CrossCodeEval harness; an anchor change re-
                                                prefills the suffix and the context)
stopDegenerate     true                         end a suggestion (and a generated body) where greedy
                                                decoding degenerated: a loop (a line written 4 times in
                                                a row, a block of 2-3 lines 3 times, of 4-16 lines
                                                twice: its first writing stays; a line ending in a
                                                piece written again and again goes) or a control
                                                character (cut before it); fastcoder/stops.py loop,
                                                control_chars. false: run to maxNewTokens / the time
                                                budget as before
keepWhitespace     false                        debug: return whitespace-only suggestions too
================== ============================ =====================================================

Changing ``model``, ``dtype``, ``device``, ``packWeights`` or ``explicitAttention`` reloads the model in the background; every
other change applies to the next request.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from fastcoder.config import METHODS, DecodeConfig
from fastcoder.models import DEFAULT_MODEL
from lsp_server.prompt import LAYOUTS

log = logging.getLogger(__name__)

RELOAD_KEYS = ("model", "dtype", "device", "pack_weights", "explicit_attention")
CONTEXT_SOURCES = ("definitions", "open", "edits")
DEFAULT_CONTEXT_SOURCES = {"definitions": 384, "open": 192, "edits": 128}
CONTEXT_PLACEMENTS = ("first", "before-middle")
REINDEX_KEYS = ("workspace_index", "common_index", "dependency_index", "python_path")
"""Settings whose change needs the model to be loaded again."""


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message says which and why."""


@dataclass
class ServerSettings:
    model: str = DEFAULT_MODEL
    dtype: str = "auto"
    device: str = "auto"
    pack_weights: str = "auto"
    explicit_attention: str = "off"
    method: str = "fastcoder"
    ar_fallback: bool = True
    max_new_tokens: int = 128
    time_budget_ms: int | None = 2000
    enabled: bool = True
    python_path: str = ""
    max_prompt_tokens: int = 2048
    suffix_share: float = 0.25
    max_suffix_tokens: int = 128
    max_body_tokens: int = 256
    body_time_budget_ms: int | None = 30000
    max_edit_tokens: int = 4096
    reuse_suggestions: bool = True
    # false since 2026-11-27 (thirty-third session): typing replay model-run p50 169 vs 211 ms
    # (FastCoder, one run), live typing the same latency (211 vs 215 ms where the model ran),
    # pause suggestions matching what was typed next 31% vs 28%, model-thread time 0.39 vs 0.48
    # s per typed s (docs/bench/midline-s33)
    mid_line_blocks: bool = False
    # 0 since 2026-11-25: in the typing replay (4 files x 150 keys, qwen2.5-coder-0.5b bf16, CPU)
    # 400 ms made the user wait ~460 ms for most model runs (the block was rarely done by then);
    # at 0 the model-run p50 was 200 ms (FastCoder) with the same first lines, and with Tab
    # accepts 46% of the body was accepted instead of 32% (docs/bench/replay-s15-early*)
    early_answer_ms: int | None = 0
    warm_on_open: bool = True
    warm_at_cursor: bool = True
    prepare_window: Any = "auto"
    workspace_index: bool = True
    common_index: bool = True
    dependency_index: bool = False
    keep_whitespace: bool = False
    stop_degenerate: bool = True
    kv_cache_mb: int = 256
    kv_disk_mb: int = 512
    prompt_layout: str = "anchored"
    debounce_ms: Any = "auto"
    prefetch: bool = True
    cross_file_context: bool = False
    file_header: Any = "auto"
    context_sources: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_CONTEXT_SOURCES))
    context_placement: str = "first"
    engine: DecodeConfig = field(default_factory=DecodeConfig)

    # ------------------------------------------------------------------ building
    def merged(self, data: dict[str, Any] | None) -> "ServerSettings":
        """A copy with ``data`` (camelCase or snake_case keys) applied.

        Unknown keys are ignored (logged); a bad value raises :class:`SettingsError`
        and leaves nothing half-applied.
        """
        if not data:
            return dataclasses.replace(self)
        if not isinstance(data, dict):
            raise SettingsError(f"settings must be a JSON object, not {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        engine_data: dict[str, Any] | None = None
        for key, value in data.items():
            name = _snake(str(key))
            if name == "engine":
                if value is not None and not isinstance(value, dict):
                    raise SettingsError("engine must be a JSON object of decoding options")
                engine_data = value or {}
            elif name in names:
                changes[name] = value
            else:
                log.info("ignoring unknown setting %r", key)
        new = dataclasses.replace(self, **changes)
        if engine_data is not None:
            try:
                new.engine = DecodeConfig.from_dict({**dataclasses.asdict(self.engine), **engine_data})
            except (TypeError, ValueError) as exc:
                raise SettingsError(f"engine: {exc}") from exc
        new._validate()
        return new

    def _validate(self) -> None:
        def positive_int(name: str) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < 1:
                raise SettingsError(f"{name} must be a positive integer, got {value!r}")
            setattr(self, name, int(value))

        for name in ("model", "dtype", "device", "method", "pack_weights", "explicit_attention"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise SettingsError(f"{name} must be a non-empty string, got {value!r}")
            setattr(self, name, value.strip())
        if self.pack_weights not in ("auto", "on", "off"):
            raise SettingsError(f"packWeights must be auto, on or off, got {self.pack_weights!r}")
        if self.explicit_attention not in ("auto", "off"):
            raise SettingsError(f"explicitAttention must be auto or off, got {self.explicit_attention!r}")
        if self.method not in METHODS:
            raise SettingsError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        positive_int("max_new_tokens")
        positive_int("max_body_tokens")
        positive_int("max_edit_tokens")
        positive_int("max_prompt_tokens")
        positive_int("kv_cache_mb")
        if isinstance(self.kv_disk_mb, bool) or not isinstance(self.kv_disk_mb, (int, float)) or int(self.kv_disk_mb) != self.kv_disk_mb \
                or self.kv_disk_mb < 0:  # fmt: skip
            raise SettingsError(f"kv_disk_mb must be an integer >= 0, got {self.kv_disk_mb!r}")
        self.kv_disk_mb = int(self.kv_disk_mb)
        if isinstance(self.max_suffix_tokens, bool) or not isinstance(self.max_suffix_tokens, int) or self.max_suffix_tokens < 0:
            raise SettingsError(f"max_suffix_tokens must be an integer >= 0, got {self.max_suffix_tokens!r}")
        if self.max_prompt_tokens < 16:
            raise SettingsError("max_prompt_tokens must be at least 16")
        if self.time_budget_ms is not None:
            if isinstance(self.time_budget_ms, bool) or not isinstance(self.time_budget_ms, (int, float)):
                raise SettingsError(f"time_budget_ms must be a number or null, got {self.time_budget_ms!r}")
            if self.time_budget_ms <= 0:
                self.time_budget_ms = None
        if self.early_answer_ms is not None:
            if isinstance(self.early_answer_ms, bool) or not isinstance(self.early_answer_ms, (int, float)) or self.early_answer_ms < 0:
                raise SettingsError(f"early_answer_ms must be a number >= 0 or null, got {self.early_answer_ms!r}")
        if self.body_time_budget_ms is not None:
            if isinstance(self.body_time_budget_ms, bool) or not isinstance(self.body_time_budget_ms, (int, float)):
                raise SettingsError(f"body_time_budget_ms must be a number or null, got {self.body_time_budget_ms!r}")
            if self.body_time_budget_ms <= 0:
                self.body_time_budget_ms = None
        if not isinstance(self.suffix_share, (int, float)) or not 0.0 <= self.suffix_share <= 0.9:
            raise SettingsError(f"suffix_share must be between 0 and 0.9, got {self.suffix_share!r}")
        if self.file_header != "auto" and not isinstance(self.file_header, bool):
            raise SettingsError(f"file_header must be \"auto\", true or false, got {self.file_header!r}")
        if self.prepare_window != "auto" and not isinstance(self.prepare_window, bool):
            raise SettingsError(f"prepare_window must be \"auto\", true or false, got {self.prepare_window!r}")
        for name in ("enabled", "reuse_suggestions", "mid_line_blocks", "warm_on_open", "warm_at_cursor", "workspace_index", "common_index",
                     "dependency_index", "keep_whitespace", "prefetch", "cross_file_context", "ar_fallback",
                     "stop_degenerate"):  # fmt: skip
            if not isinstance(getattr(self, name), bool):
                raise SettingsError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.python_path is None:
            self.python_path = ""
        sources = self.context_sources
        if not isinstance(sources, dict):
            raise SettingsError(f"context_sources must be an object of source name -> token budget, got {sources!r}")
        for name, budget in sources.items():
            if name not in CONTEXT_SOURCES:
                raise SettingsError(f"unknown context source {name!r}; choose among {', '.join(CONTEXT_SOURCES)}")
            if isinstance(budget, bool) or not isinstance(budget, (int, float)) or int(budget) != budget or budget < 0:
                raise SettingsError(f"context_sources.{name} must be a token count >= 0, got {budget!r}")
        self.context_sources = {n: int(b) for n, b in sources.items() if b}
        if self.context_placement not in CONTEXT_PLACEMENTS:
            raise SettingsError(f"context_placement must be one of {', '.join(CONTEXT_PLACEMENTS)}, got {self.context_placement!r}")
        if self.prompt_layout not in LAYOUTS:
            raise SettingsError(f"prompt_layout must be one of {', '.join(LAYOUTS)}, got {self.prompt_layout!r}")
        if self.debounce_ms != "auto":
            value = self.debounce_ms
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 5000:
                raise SettingsError(f"debounce_ms must be \"auto\" or a number of ms between 0 and 5000, got {value!r}")

    # ------------------------------------------------------------------ using
    def needs_reload(self, other: "ServerSettings") -> bool:
        """Whether going from ``other`` to ``self`` needs the model loaded again."""
        return any(getattr(self, k) != getattr(other, k) for k in RELOAD_KEYS)

    def needs_reindex(self, other: "ServerSettings") -> bool:
        return any(getattr(self, k) != getattr(other, k) for k in REINDEX_KEYS)

    @property
    def plans_window(self) -> bool:
        """Whether the window's next start is planned and prefilled in idle time
        (``prepareWindow``; ``auto``: when ``prefetch`` is off)."""
        return self.prepare_window is True or (self.prepare_window == "auto" and not self.prefetch)

    @property
    def early_answer_s(self) -> float | None:
        return None if self.early_answer_ms is None else self.early_answer_ms / 1000.0

    @property
    def time_budget_s(self) -> float | None:
        return None if self.time_budget_ms is None else self.time_budget_ms / 1000.0

    def decode_config(self, *, max_new_tokens: int | None = None, time_budget_s: float | None = -1.0, method: str | None = None) -> DecodeConfig:
        """The engine configuration for one request (the nested engine options plus
        the request-level ones: method, token cap, time budget)."""
        return self.engine.replace(
            method=method or self.method,
            max_new_tokens=max_new_tokens or self.max_new_tokens,
            time_budget_s=self.time_budget_s if time_budget_s == -1.0 else time_budget_s,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, DecodeConfig):
                value = {k: v for k, v in dataclasses.asdict(value).items() if k != "extra"}
            camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), f.name)
            out[camel] = value
        return out
