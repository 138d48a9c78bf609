"""Neovim as a user sees it: the plugin in a real terminal (tmux), the real server and model.

Neovim (each of conftest's ``nvim_bin``: the system's, Debian's 0.7.2 in CI, and Debian's
0.10 and 0.12 unpacked by tests/neovim_debian.py) runs inside a detached tmux session with the FastCoder
plugin (editor-client/nvim) and ``fastcoder serve`` on ``smollm2-135m``. The test opens a
Python file (tests/data/editor_document.py.txt, lsp_server/postprocess.py as it was on
2026-11-27, frozen so that editing the module cannot change what the model writes here,
with a new function at its end), goes
to a new line in that function's body, asks for completions with
``<C-x><C-o>`` (omni completion, what 0.7 has; retried as a user would while the model
loads) and reads the screen with ``tmux capture-pane``. The popup menu must show the
server's suggestion. The capture is written to editor-client/web-test/out/nvim-tmux.txt;
with ``FASTCODER_UPDATE_DOCS=1`` also to docs/screenshots/nvim-tmux.txt (the README's).

Skips (with the reason) without nvim or tmux (``make test`` installs both when root) or
when the model is not fetched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fastcoder import models

REPO = Path(__file__).resolve().parents[1]
# the real model lives in the user's cache (read before conftest points FASTCODER_CACHE at a
# temporary folder, as tests/test_models.py does); the server runs with it
USER_CACHE = models.cache_root()
PLUGIN_DIR = REPO / "editor-client" / "nvim"
OUT = REPO / "editor-client" / "web-test" / "out"
DOC_CAPTURE = REPO / "docs" / "screenshots" / "nvim-tmux.txt"
# the document the editor tests open (a real module of this repository, frozen: the tiny real
# model's suggestion there must not change when the module is edited)
EDITOR_DOCUMENT = REPO / "tests" / "data" / "editor_document.py.txt"
MODEL = os.environ.get("FASTCODER_BROWSER_MODEL", "smollm2-135m")
LOAD_WAIT_S = float(os.environ.get("FASTCODER_NVIM_TMUX_LOAD_TIMEOUT", "480"))  # model load (+ cost curve once)
WAIT_S = 150.0  # then: until the menu shows

# the browser test's context (tests/test_browser_client.py): a real file of this
# repository with a new function typed at its end
STUB = '\n\ndef count_words(text: str) -> int:\n    """Return the number of words in text."""\n'


def _tmux(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"tmux {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def _model_available(name: str) -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "fastcoder_cli", "models", "list"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "FASTCODER_CACHE": str(USER_CACHE)},
    )  # fmt: skip
    return proc.returncode == 0 and any(
        line.split()[:1] == [name] and " cached " in f" {line} " and "not cached" not in line
        for line in proc.stdout.splitlines()
    )


def _menu(screen: str) -> list[str]:
    """The completion menu's lines below the function (an item: label, kind, detail)."""
    lines = screen.split("\n")
    at = next((i for i, ln in enumerate(lines) if "def count_words" in ln), None)
    return [] if at is None else [ln for ln in lines[at + 1 :] if "FastCoder" in ln]


@contextlib.contextmanager
def _nvim_in_tmux(tmp_path: Path, nvim: str):
    """Neovim (``nvim``) in a detached tmux session on the editor document, its server ready:
    yields (tmux session name, the document's path)."""
    if not shutil.which("tmux"):
        pytest.skip("needs tmux (`apt-get install -y tmux`; make test does it when root)")
    if not _model_available(MODEL):
        pytest.skip(f"model {MODEL} is not fetched: `fastcoder models fetch {MODEL}`")
    work = tmp_path / "project"
    work.mkdir()
    (work / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    src = work / "postprocess.py"
    src.write_text(EDITOR_DOCUMENT.read_text() + STUB)
    status_file = tmp_path / "status"
    init = tmp_path / "init.lua"
    init.write_text(
        textwrap.dedent(
            f"""
            vim.opt.runtimepath:prepend({str(PLUGIN_DIR)!r})
            vim.cmd("filetype plugin indent on")
            vim.cmd("syntax on")
            vim.o.completeopt = "menuone,noinsert"
            vim.o.swapfile = false
            local opts = {{ model = {MODEL!r}, dtype = "float32", device = "cpu", commonIndex = false, maxPromptTokens = 1024 }}
            require("fastcoder").setup({{
              cmd = {{ {sys.executable!r}, "-m", "fastcoder_cli", "serve" }},
              init_options = opts,
              settings = opts,
              filetypes = {{ "python" }},
              on_status = function(s)
                local f = io.open({str(status_file)!r}, "w")
                f:write(s.state or "")
                f:close()
              end,
            }})
            """
        )
    )
    session = f"fc{os.getpid()}"
    env_prefix = f"PYTHONPATH={REPO} FASTCODER_CACHE={USER_CACHE} XDG_STATE_HOME={tmp_path}/state XDG_DATA_HOME={tmp_path}/data"
    _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "20", "-c", str(work),
          f"env {env_prefix} {nvim} -n -i NONE -u {init} {src.name}")  # fmt: skip
    try:
        deadline = time.monotonic() + LOAD_WAIT_S
        while time.monotonic() < deadline and (not status_file.exists() or status_file.read_text() != "ready"):
            time.sleep(0.5)
        assert status_file.exists() and status_file.read_text() == "ready", (
            f"server not ready after {LOAD_WAIT_S:.0f} s (status: {status_file.read_text() if status_file.exists() else 'none'})"
        )
        yield session, src
    finally:
        _tmux("kill-session", "-t", session, check=False)


def _capture_name(name: str, request: pytest.FixtureRequest) -> str:
    """``name`` for the system's Neovim (the README's captures), ``name`` with the version
    before its suffix for Debian's newer ones (``nvim-ghost-0.12.txt``)."""
    version = request.node.callspec.params.get("nvim_bin", "system")
    return name if version == "system" else name.replace(".txt", f"-{version}.txt")


def _save_capture(screen: str, name: str) -> str:
    """The screen as text (trailing blanks off), written to OUT/name (and to docs/screenshots
    with ``FASTCODER_UPDATE_DOCS=1``)."""
    capture = "\n".join(line.rstrip() for line in screen.rstrip("\n").split("\n")) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(capture)
    if os.environ.get("FASTCODER_UPDATE_DOCS", "").strip() not in ("", "0"):
        DOC_CAPTURE.parent.mkdir(parents=True, exist_ok=True)
        (DOC_CAPTURE.parent / name).write_text(capture)
    return capture


def test_omni_completion_in_tmux(nvim_bin: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with _nvim_in_tmux(tmp_path, nvim_bin) as (session, _src):
        deadline = time.monotonic() + WAIT_S
        # the last line (the docstring), open a line below it: Neovim indents it
        _tmux("send-keys", "-t", session, "G", "z", "z", "o")  # (zz: room for the menu below)
        screen = ""
        while time.monotonic() < deadline:
            _tmux("send-keys", "-t", session, "C-x", "C-o")
            until = time.monotonic() + 20
            while time.monotonic() < until:
                time.sleep(0.5)
                screen = _tmux("capture-pane", "-p", "-t", session)
                if _menu(screen):
                    break
            if _menu(screen):
                break
            _tmux("send-keys", "-t", session, "C-e")  # "Pattern not found": close it, ask again
        time.sleep(0.5)
        screen = _tmux("capture-pane", "-p", "-t", session)
    capture = _save_capture(screen, _capture_name(DOC_CAPTURE.name, request))
    menu = _menu(capture)
    assert menu and "return" in menu[0], f"no suggestion in the popup:\n{capture}"


def _below_stub(screen: str) -> list[str]:
    """The screen's lines below the stub's docstring, up to the first empty one."""
    lines = screen.split("\n")
    at = next((i for i, ln in enumerate(lines) if '"""Return the number of words' in ln), None)
    if at is None:
        return []
    out = []
    for ln in lines[at + 1 :]:
        if not ln.strip() or ln.startswith("~"):
            break
        out.append(ln.rstrip())
    return out


def test_ghost_text_in_tmux(nvim_bin: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Ghost text as the plugin sets it up by default: its own (``fastcoder.ghost``) on every
    version. A new line in the stub's body shows the suggestion on the screen without any key
    but ``o``; it is
    virtual (gone from the screen after <Esc>, not in the buffer), and on the same new line
    again (``u``, ``o``) <Tab> puts it in the file (written with ``:w`` and read back)."""
    with _nvim_in_tmux(tmp_path, nvim_bin) as (session, src):
        deadline = time.monotonic() + WAIT_S
        _tmux("send-keys", "-t", session, "G", "z", "z", "o")
        screen, shown = "", []
        while time.monotonic() < deadline and not any(ln.strip() for ln in shown):
            time.sleep(0.5)
            screen = _tmux("capture-pane", "-p", "-t", session)
            shown = _below_stub(screen)
        seen = screen
        _tmux("send-keys", "-t", session, "Escape")
        time.sleep(1.0)
        after_esc = _below_stub(_tmux("capture-pane", "-p", "-t", session))
        _tmux("send-keys", "-t", session, "u", "o")  # the empty line undone, opened again
        until = time.monotonic() + 60
        while time.monotonic() < until and not any(ln.strip() for ln in _below_stub(_tmux("capture-pane", "-p", "-t", session))):
            time.sleep(0.5)
        _tmux("send-keys", "-t", session, "Tab")
        time.sleep(1.0)
        _tmux("send-keys", "-t", session, "Escape", ":w", "Enter")
        time.sleep(1.0)
    capture = _save_capture(seen, _capture_name("nvim-ghost.txt", request))
    assert shown and any("return" in ln for ln in shown), f"no ghost text below the stub:\n{capture}"
    assert not any(ln.strip() for ln in after_esc), f"the ghost text stayed after <Esc>: {after_esc}"
    written = src.read_text().rstrip("\n").split("\n")
    body = written[written.index('    """Return the number of words in text."""') + 1 :]
    assert body and body[0].strip() == shown[0].strip(), (body, shown)
