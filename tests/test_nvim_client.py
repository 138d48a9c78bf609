"""End-to-end tests of the Neovim client (editor-client/nvim) in a real, headless Neovim.

* ``test_setup_without_server`` runs editor-client/nvim/tests/smoke.lua: ``setup()`` with a
  missing server binary must notify, not crash (works on Debian's Neovim 0.7.2).
* ``test_fake_server_roundtrip`` drives the plugin against a tiny stdlib-only LSP server
  (initializationOptions, settings, ``fastcoder/status``, completion, executeCommand).
* ``test_completion_with_real_server`` starts the real ``fastcoder serve`` on a scripted
  tiny model (``nvim_model_dir``), asks for ``textDocument/completion`` and applies the
  "Generate function body" code action, each with the answer the model was built to give.

Neovim is taken from PATH. When it is missing it is installed with
``apt-get install -y neovim`` only when running as root and ``CI`` or
``FASTCODER_INSTALL_NVIM=1`` is set; otherwise the tests are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import nvim_version, parse_nvim_version

REPO = Path(__file__).resolve().parents[1]
PLUGIN_DIR = REPO / "editor-client" / "nvim"
SMOKE = PLUGIN_DIR / "tests" / "smoke.lua"

NVIM_TIMEOUT_S = float(os.environ.get("FASTCODER_NVIM_TIMEOUT", "420"))


# --------------------------------------------------------------------------- neovim

# nvim_bin (conftest.py): the system's Neovim and Debian's 0.10 / 0.12, each test once per version


def run_nvim(
    nvim: str,
    script: Path,
    cwd: Path,
    state: Path,
    timeout: float = NVIM_TIMEOUT_S,
    env: dict | None = None,
):
    """Run ``nvim --headless -u NONE`` on a Lua script with a hard timeout.

    ``state`` holds Neovim's XDG state/data/cache (LSP log included), outside the project.
    Neovim and the language server it starts run in their own process group, which is
    killed as a whole on timeout. Returns (returncode, stdout, stderr).
    """
    full_env = dict(os.environ)
    full_env.update(
        {
            "XDG_STATE_HOME": str(state / "state"),
            "XDG_DATA_HOME": str(state / "data"),
            "XDG_CACHE_HOME": str(state / "cache"),
            "XDG_CONFIG_HOME": str(state / "config"),
            "NVIM_LOG_FILE": str(state / "nvim.log"),
        }
    )
    full_env.update(env or {})
    cmd = [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {script}"]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        pytest.fail(f"nvim did not finish within {timeout:.0f}s\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    finally:
        # a server left behind by a crashed nvim
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return proc.returncode, out, err


def lsp_log_tail(state: Path, n: int = 4000) -> str:
    """The end of Neovim's LSP log (the server's stderr lands there)."""
    log = state / "state" / "nvim" / "lsp.log"
    return log.read_text(errors="replace")[-n:] if log.exists() else "(no lsp.log)"


def read_result(path: Path, rc: int, out: str, err: str) -> dict:
    if not path.exists():
        pytest.fail(f"nvim wrote no result (rc={rc})\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    return json.loads(path.read_text())


# --------------------------------------------------------------------------- Lua driver

# Template of the Lua script run inside Neovim. CONFIG is JSON (see client_script()).
LUA_DRIVER = r"""
local CFG = vim.fn.json_decode([==[__CONFIG__]==])
local result = { ok = false, steps = {}, notes = {} }
local function step(s) table.insert(result.steps, s) end
local function finish()
  local f = io.open(CFG.out, "w")
  f:write(vim.fn.json_encode(result))
  f:close()
end
local orig_notify = vim.notify
vim.notify = function(msg, level)
  table.insert(result.notes, { msg = tostring(msg), level = level })
end

local ok, err = pcall(function()
  local v = vim.version()
  result.nvim = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  vim.opt.runtimepath:prepend(CFG.plugin_dir)
  vim.cmd("filetype on")
  local fc = require("fastcoder")
  fc.setup({
    cmd = CFG.cmd,
    init_options = CFG.init_options,
    filetypes = { "python" },
    inline_completion = true,
  })
  step("setup")
  vim.cmd("edit " .. vim.fn.fnameescape(CFG.file))
  if vim.bo.filetype ~= "python" then
    vim.bo.filetype = "python"
  end
  local bufnr = vim.api.nvim_get_current_buf()
  step("opened " .. vim.bo.filetype)
  result.omnifunc_pre = vim.bo.omnifunc

  -- wait for the client to be initialized
  local client
  local inited = vim.wait(CFG.start_timeout_ms, function()
    client = fc.get_clients({ bufnr = bufnr })[1]
    return client ~= nil and (client.initialized == true or client.server_capabilities ~= nil and next(client.server_capabilities) ~= nil)
  end, 50)
  result.initialized = inited
  if not inited then
    result.error = "the client did not initialize; status=" .. vim.inspect(fc.status)
    return
  end
  result.client_root = client.config.root_dir
  result.omnifunc = vim.bo[bufnr].omnifunc
  step("initialized")

  -- wait for fastcoder/status ready (or error); request anyway after the timeout
  vim.wait(CFG.ready_timeout_ms, function()
    return fc.status.state == "ready" or fc.status.state == "error"
  end, 100)
  result.status = { state = fc.status.state, message = fc.status.message }
  step("status " .. tostring(fc.status.state))

  local line = vim.api.nvim_buf_get_lines(bufnr, CFG.line, CFG.line + 1, false)[1] or ""
  vim.api.nvim_win_set_cursor(0, { CFG.line + 1, #line })
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = CFG.line, character = #line },
    context = { triggerKind = 1 },
  }
  local responses, req_err = vim.lsp.buf_request_sync(0, "textDocument/completion", params, CFG.request_timeout_ms)
  result.request_error = req_err and tostring(req_err) or nil
  local labels, errors = {}, {}
  for _, resp in pairs(responses or {}) do
    local e = resp.err or resp.error
    if e then table.insert(errors, vim.inspect(e)) end
    local r = resp.result
    local items = {}
    if type(r) == "table" then items = r.items or r end
    for _, item in ipairs(items) do
      table.insert(labels, item.label or "")
    end
  end
  result.n_items = #labels
  result.labels = { unpack(labels, 1, 5) }
  result.errors = errors
  step("completion")

  if CFG.stub_file then
    -- "Generate function body" as users run it: vim.lsp.buf.code_action(), the action
    -- picked in vim.ui.select, resolved (codeAction/resolve) and applied by Neovim
    vim.cmd("edit " .. vim.fn.fnameescape(CFG.stub_file))
    local sbuf = vim.api.nvim_get_current_buf()
    vim.wait(CFG.start_timeout_ms, function() return fc.get_clients({ bufnr = sbuf })[1] ~= nil end, 50)
    vim.api.nvim_win_set_cursor(0, { 1, 4 })
    local offered = {}
    vim.ui.select = function(items, opts, on_choice)
      for _, item in ipairs(items) do
        local action = item[2] or item.action or item
        table.insert(offered, action.title or vim.inspect(action))
      end
      on_choice(items[1], 1)
    end
    vim.lsp.buf.code_action()
    vim.wait(CFG.request_timeout_ms, function()
      return (vim.api.nvim_buf_get_lines(sbuf, 1, 2, false)[1] or "") ~= "    pass"
    end, 50)
    result.actions_offered = offered
    result.stub_after = vim.api.nvim_buf_get_lines(sbuf, 0, -1, false)
    step("code action")
  end

  if CFG.extra then
    -- where the cursor rests: fastcoder/cursor once it has not moved for cursor_rest_ms
    -- (a headless Neovim runs no CursorMoved by itself inside a script: fired here)
    vim.api.nvim_exec_autocmds("CursorMoved", { buffer = bufnr })
    result.cursor = vim.api.nvim_win_get_cursor(0)
    vim.wait(1000, function() return false end, 50)
    -- executeCommand fastcoder.stats through the plugin
    local stats
    fc.execute("fastcoder.stats", {}, function(e, r) stats = { err = e and vim.inspect(e) or nil, result = r } end, bufnr)
    vim.wait(10000, function() return stats ~= nil end, 20)
    result.stats = stats and stats.result or vim.NIL
    -- :FastCoderEdit on line 1 (the server applies the edit with workspace/applyEdit)
    vim.cmd("1FastCoderEdit rename add to plus")
    vim.wait(10000, function()
      return (vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1] or ""):find("plus", 1, true) ~= nil
    end, 20)
    result.line1_after_edit = vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1]
    -- settings change -> workspace/didChangeConfiguration
    vim.cmd("FastCoderDisable")
    vim.wait(300)
    vim.cmd("FastCoderStatus")
    result.status_text = fc.status_text()
  end
  result.ok = true
end)
if not ok then result.error = tostring(err) end
vim.notify = orig_notify
-- stop the server cleanly so it does not linger
pcall(function()
  for _, c in ipairs(require("fastcoder").get_clients()) do
    if vim.fn.has("nvim-0.11") == 1 then c:stop() else c.stop() end
  end
  vim.wait(3000, function() return #require("fastcoder").get_clients() == 0 end, 50)
end)
finish()
vim.cmd("qa!")
"""


def client_script(tmp_path: Path, **config) -> Path:
    text = json.dumps(config)
    assert "]==]" not in text
    script = tmp_path / "fastcoder_nvim_test.lua"
    script.write_text(LUA_DRIVER.replace("__CONFIG__", text))
    return script


MATHUTIL = textwrap.dedent(
    '''\
    def add(a, b):
        """Return the sum of a and b."""
        return a + b


    def mul(a, b):
        """Return the product of a and b."""
        return a * b


    def sub(a, b):
        """Return a minus b."""
        return '''
)
"""The project's ``pkg/mathutil.py``; the completion is asked at its end (line 12)."""
STUBS = "def double(x):\n    pass\n"
"""The project's ``pkg/stubs.py``, whose stub's body the code action generates."""
COMPLETION_ANSWER, BODY_ANSWER = "a - b", "result = x * 2"  # (tokens of their own: " return" ends the completion's prompt)


def make_project(tmp_path: Path) -> tuple[Path, Path]:
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.0.1"\n')
    src = proj / "pkg" / "mathutil.py"
    src.write_text(MATHUTIL)
    return proj, src


@pytest.fixture(scope="module")
def nvim_model_dir(tmp_path_factory, tiny_tokenizer):
    """A scripted tiny model (tests/conftest.py ``build_scripted_model``) that completes
    ``MATHUTIL``'s last line with :data:`COMPLETION_ANSWER` and writes :data:`BODY_ANSWER`
    as ``STUBS``' body: what the random model wrote there was shown or cut by the
    suggestion rules by chance (``return`` and an unclosed ``\"\"\"`` is nothing now)."""
    from conftest import build_scripted_model
    from fastcoder.models.load import detect_fim
    from fastcoder.tokens import TokenInfo
    from lsp_server import actions
    from lsp_server.prompt import CursorContext, build_prompt

    fim, info = detect_fim(tiny_tokenizer), TokenInfo.for_tokenizer(tiny_tokenizer)
    done = build_prompt(tiny_tokenizer, fim, CursorContext(MATHUTIL, "", "python"), 2048, layout="anchored", info=info)
    stub = actions.find_stub(STUBS, 0, "python")
    body = build_prompt(tiny_tokenizer, fim, CursorContext(*actions.body_prompt_context(STUBS, stub)), 2048,
                        max_suffix_tokens=None, layout="anchored", info=info)  # fmt: skip
    path = tmp_path_factory.mktemp("tiny-qwen2-nvim")
    build_scripted_model(tiny_tokenizer, tiny_tokenizer.decode(done.ids[-1:]), done.heal + COMPLETION_ANSWER,
                         more=((tiny_tokenizer.decode(body.ids[-1:]), body.heal + BODY_ANSWER),)).save_pretrained(path)  # fmt: skip
    tiny_tokenizer.save_pretrained(path)
    return path


# --------------------------------------------------------------------------- tests


def test_setup_without_server(nvim_bin: str, tmp_path: Path):
    """setup() with a nonexistent server binary notifies instead of raising (0.7.2 and newer)."""
    out = tmp_path / "smoke.json"
    rc, stdout, stderr = run_nvim(
        nvim_bin, SMOKE, tmp_path, tmp_path / "nvim-state", timeout=120, env={"FASTCODER_SMOKE_OUT": str(out)}
    )
    res = read_result(out, rc, stdout, stderr)
    failed = [c for c in res["checks"] if not c["ok"]]
    assert res["ok"] and not failed and rc == 0, f"nvim {res.get('version')}: {failed}\n{stderr[-2000:]}"


FAKE_SERVER = r'''
import json, sys

log_path = sys.argv[1]
log = {"init_options": None, "configurations": [], "opened": [], "commands": [], "cursor": [], "inline": []}

def save():
    with open(log_path, "w") as f:
        json.dump(log, f)

def read():
    headers = {}
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.decode("ascii").strip()
        if not line:
            break
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return json.loads(sys.stdin.buffer.read(int(headers["content-length"])))

def send(msg):
    msg["jsonrpc"] = "2.0"
    body = json.dumps(msg).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()

# text before the cursor (stripped of its indentation) -> (suggestion, characters right of
# the cursor it replaces)
INLINE = {
    "return ": ("w * h\n# done", 0),
    "return w": (" * h\n# done", 0),
    "return w * h": ("\n# done", 0),
    "print(": ('"h\u00e9")', 1),  # replaces the auto-closed ")"
}
texts = {}
next_id = 1000
while True:
    msg = read()
    if msg is None:
        break
    method, mid = msg.get("method"), msg.get("id")
    params = msg.get("params") or {}
    if method == "initialize":
        log["init_options"] = params.get("initializationOptions")
        log["root_uri"] = params.get("rootUri")
        send({"id": mid, "result": {
            "capabilities": {
                "textDocumentSync": 1,
                "completionProvider": {"resolveProvider": False},
                "inlineCompletionProvider": {},
                "executeCommandProvider": {"commands": ["fastcoder.editSelection", "fastcoder.rebuildIndex", "fastcoder.stats"]},
            },
            "serverInfo": {"name": "fake-fastcoder"},
        }})
    elif method == "initialized":
        send({"method": "fastcoder/status", "params": {"state": "loading", "message": "loading fake"}})
        send({"method": "fastcoder/status", "params": {"state": "ready", "message": "fake ready"}})
    elif method == "workspace/didChangeConfiguration":
        log["configurations"].append(params.get("settings"))
    elif method == "textDocument/didOpen":
        log["opened"].append(params["textDocument"]["uri"])
        texts[params["textDocument"]["uri"]] = params["textDocument"]["text"]
    elif method == "textDocument/didChange":
        texts[params["textDocument"]["uri"]] = params["contentChanges"][-1]["text"]  # full sync
    elif method == "textDocument/inlineCompletion":
        # ghost text (GHOST_DRIVER): an answer per text before the cursor, as the real server
        # answers: ranges in UTF-16 columns
        pos = params["position"]
        line = texts.get(params["textDocument"]["uri"], "").split("\n")[pos["line"]]
        log["inline"].append(line[: pos["character"]])
        answer = INLINE.get(line[: pos["character"]].lstrip())
        items = []
        if answer is not None:
            text, replaces = answer
            end = {"line": pos["line"], "character": pos["character"] + replaces}
            items = [{"insertText": text, "range": {"start": pos, "end": end}}]
        send({"id": mid, "result": {"items": items}})
    elif method == "fastcoder/cursor":
        log["cursor"].append(params)
    elif method == "textDocument/completion" and len(sys.argv) > 2 and sys.argv[2] == "lines":
        # what fastcoder serve answers at "f(|": the arguments on lines of their own, as a
        # text edit at the cursor
        pos = params["position"]
        send({"id": mid, "result": {"isIncomplete": True, "items": [
            {"label": "x,", "kind": 15, "detail": "FastCoder", "insertTextFormat": 1, "filterText": "",
             "textEdit": {"range": {"start": pos, "end": pos}, "newText": "\n    x,\n    y,\n"}},
        ]}})
    elif method == "textDocument/completion":
        send({"id": mid, "result": {"isIncomplete": False, "items": [
            {"label": "a - b", "insertText": "a - b", "kind": 1},
        ]}})
    elif method == "workspace/executeCommand":
        log["commands"].append(params)
        cmd = params.get("command")
        if cmd == "fastcoder.stats":
            send({"id": mid, "result": {"completions": 1, "method": "fake"}})
        elif cmd == "fastcoder.editSelection":
            arg = params["arguments"][0]
            edit = {"changes": {arg["uri"]: [{"range": arg["range"], "newText": "def plus(a, b):"}]}}
            next_id += 1
            send({"id": next_id, "method": "workspace/applyEdit", "params": {"edit": edit}})
            send({"id": mid, "result": {"edit": edit}})
        else:
            send({"id": mid, "result": None})
    elif method == "shutdown":
        send({"id": mid, "result": None})
    elif method == "exit":
        break
    elif mid is not None and method is not None:
        send({"id": mid, "error": {"code": -32601, "message": "not implemented: " + method}})
    save()
save()
'''


def test_fake_server_roundtrip(nvim_bin: str, tmp_path: Path):
    """The plugin against a stdlib-only fake server: the whole client side, no model needed."""
    proj, src = make_project(tmp_path)
    server = tmp_path / "fake_server.py"
    server.write_text(FAKE_SERVER)
    log = tmp_path / "server_log.json"
    out = tmp_path / "result.json"
    init_options = {"model": "/models/tiny", "dtype": "float32", "maxNewTokens": 8}
    script = client_script(
        tmp_path,
        plugin_dir=str(PLUGIN_DIR),
        cmd=[sys.executable, str(server), str(log)],
        init_options=init_options,
        file=str(src),
        line=12,
        out=str(out),
        start_timeout_ms=20000,
        ready_timeout_ms=10000,
        request_timeout_ms=20000,
        extra=True,
    )
    rc, stdout, stderr = run_nvim(nvim_bin, script, proj, tmp_path / "nvim-state", timeout=120)
    res = read_result(out, rc, stdout, stderr)
    assert res["ok"], f"nvim {res.get('nvim')}: {res.get('error')} steps={res.get('steps')} notes={res.get('notes')}"
    assert res["status"] == {"state": "ready", "message": "fake ready"}
    assert res["n_items"] == 1 and res["labels"] == ["a - b"], res
    assert res["omnifunc"] == "v:lua.vim.lsp.omnifunc"
    assert Path(res["client_root"]).resolve() == proj.resolve()
    assert res["stats"] == {"completions": 1, "method": "fake"}
    assert res["line1_after_edit"] == "def plus(a, b):"
    assert "fake ready" in res["status_text"]

    srv = json.loads(log.read_text())
    assert srv["init_options"] == init_options
    # settings pushed under the `fastcoder` section, then `enabled: false` from :FastCoderDisable
    assert srv["configurations"][0] == {"fastcoder": init_options}
    assert srv["configurations"][-1] == {"fastcoder": {**init_options, "enabled": False}}
    assert any(uri.endswith("/pkg/mathutil.py") for uri in srv["opened"])
    # the cursor on line 12 (normal mode: on its last character), reported once after it
    # rested, in UTF-16 columns (the line is ASCII: its byte column)
    row, col = res["cursor"]
    assert row == 13 and col > 0
    assert len(srv["cursor"]) == 1, srv["cursor"]
    assert srv["cursor"][0]["textDocument"]["uri"].endswith("/pkg/mathutil.py")
    assert srv["cursor"][0]["position"] == {"line": 12, "character": col}
    edit_cmd = next(c for c in srv["commands"] if c["command"] == "fastcoder.editSelection")
    (arg,) = edit_cmd["arguments"]
    assert arg["instruction"] == "rename add to plus"
    assert arg["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": len("def add(a, b):")}}


# Omni completion as a user does it: <C-x><C-o> in insert mode after "f(", then (with the
# menu shown) <C-y>, or (one item, Neovim's default 'completeopt') <Esc>; the buffer is read
# after that. Keys go through the typeahead, so the steps run from timers, not in the script.
LINES_DRIVER = r"""
local CFG = vim.fn.json_decode([==[__CONFIG__]==])
vim.opt.runtimepath:prepend(CFG.plugin_dir)
vim.cmd("filetype on")
vim.o.completeopt = CFG.completeopt
local fc = require("fastcoder")
fc.setup({ cmd = CFG.cmd, filetypes = { "python" } })
vim.cmd("edit " .. vim.fn.fnameescape(CFG.file))
local bufnr = vim.api.nvim_get_current_buf()
local result = { nvim = tostring(vim.version()) }
local function finish()
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for i, l in ipairs(lines) do lines[i] = l:gsub("%z", "^@") end
  result.lines, result.cursor, result.mode = lines, vim.api.nvim_win_get_cursor(0), vim.api.nvim_get_mode().mode
  local f = io.open(CFG.out, "w"); f:write(vim.fn.json_encode(result)); f:close()
  vim.cmd("qa!")
end
result.initialized = vim.wait(20000, function()
  local c = fc.get_clients({ bufnr = bufnr })[1]
  return c ~= nil and c.initialized == true
end, 50)
vim.api.nvim_win_set_cursor(0, { 1, 5 })  -- on the "(" of "y = f(a)"
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("a<C-x><C-o>", true, false, true), "t", false)
local tries = 0
local function poll()
  tries = tries + 1
  if vim.fn.pumvisible() == 1 or tries > 40 then
    result.menu = vim.fn.pumvisible() == 1
    local key = result.menu and "<C-y>" or "<Esc>"
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(key, true, false, true), "t", false)
    vim.defer_fn(finish, 300)
  else
    vim.defer_fn(poll, 50)
  end
end
vim.defer_fn(poll, 50)
"""


@pytest.mark.parametrize("completeopt", ["menu,preview", "menuone,noinsert"])
def test_a_multi_line_item_is_inserted_as_lines(nvim_bin: str, tmp_path: Path, completeopt: str):
    """Insert-mode completion puts a multi-line item on one line with a NUL for each line
    break (seen on Neovim 0.7.2 until the thirty-fifth session: ``y = f(^@    x,^@    y,^@a)``);
    the plugin splits it into lines at CompleteDone, the cursor after the inserted text."""
    proj, _ = make_project(tmp_path)
    src = proj / "pkg" / "call.py"
    src.write_text("y = f(a)\nz = 1\n")
    server = tmp_path / "fake_server.py"
    server.write_text(FAKE_SERVER)
    out = tmp_path / "result.json"
    config = {"plugin_dir": str(PLUGIN_DIR), "cmd": [sys.executable, str(server), str(tmp_path / "log.json"), "lines"],
              "file": str(src), "out": str(out), "completeopt": completeopt}  # fmt: skip
    script = tmp_path / "lines.lua"
    script.write_text(LINES_DRIVER.replace("__CONFIG__", json.dumps(config)))
    rc, stdout, stderr = run_nvim(nvim_bin, script, proj, tmp_path / "nvim-state", timeout=120)
    res = read_result(out, rc, stdout, stderr)
    assert res["initialized"], res
    assert res["menu"] == (completeopt == "menuone,noinsert"), res
    assert res["lines"] == ["y = f(", "    x,", "    y,", "a)", "z = 1"], res
    assert res["cursor"] == [4, 0], res


# Ghost text as a user meets it (Neovim before 0.12: the plugin's own, fastcoder.ghost): keys
# typed in insert mode, each step waiting for what the one before should show. Keys go
# through the typeahead, so the steps run from timers. A step: {keys, until} (until: the name
# of a check in WAIT, or nil); what the ghost text and the buffer were after each step is
# recorded.
GHOST_DRIVER = r"""
local CFG = vim.fn.json_decode([==[__CONFIG__]==])
vim.opt.runtimepath:prepend(CFG.plugin_dir)
vim.cmd("filetype on")
local fc = require("fastcoder")
-- CFG.native: Neovim 0.12's own inline completion (vim.lsp.inline_completion), else the
-- plugin's ghost text (fastcoder.ghost), on every version
-- CFG.global_native: the user's config turns on Neovim's own inline completion for every client
if CFG.global_native then vim.lsp.inline_completion.enable(true) end
fc.setup({ cmd = CFG.cmd, init_options = CFG.init_options, filetypes = { "python" }, cursor_rest_ms = false,
           inline_completion = CFG.native })
vim.cmd("edit " .. vim.fn.fnameescape(CFG.file))
local bufnr = vim.api.nvim_get_current_buf()
local ghost = require("fastcoder.ghost")
local result = { nvim = tostring(vim.version()), steps = {} }
local function namespace()
  if CFG.native then return vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"] end
  return ghost.ns
end
local function marks()
  local out, ns = {}, namespace()
  if not ns then return out end
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })) do
    local d = m[4]
    local lines = {}
    for _, l in ipairs(d.virt_lines or {}) do table.insert(lines, l[1][1]) end
    table.insert(out, { row = m[2], col = m[3], text = d.virt_text and d.virt_text[1][1] or vim.NIL,
                        pos = d.virt_text_pos or vim.NIL, lines = lines, hl = d.virt_text and d.virt_text[1][2] or vim.NIL })
  end
  return out
end
-- the suggestion on screen as text: the plugin's own record, or (native) its one extmark's
local function shown_text()
  if not CFG.native then
    local shown = ghost.current(bufnr)
    return shown and shown.text or nil
  end
  local m = marks()[1]
  if not m then return nil end
  local text = m.text ~= vim.NIL and m.text or ""
  for _, l in ipairs(m.lines) do text = text .. "\n" .. l end
  return text
end
local function snapshot(name)
  local shown = shown_text()
  local own = vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"]
  table.insert(result.steps, { name = name, ghost = shown or vim.NIL, marks = marks(),
                               native_marks = own and #vim.api.nvim_buf_get_extmarks(bufnr, own, 0, -1, {}) or 0,
                               lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false),
                               cursor = vim.api.nvim_win_get_cursor(0), mode = vim.api.nvim_get_mode().mode })
end
local function finish()
  local f = io.open(CFG.out, "w"); f:write(vim.fn.json_encode(result)); f:close()
  for _, c in ipairs(fc.get_clients()) do
    if vim.fn.has("nvim-0.11") == 1 then c:stop() else c.stop() end
  end
  vim.wait(3000, function() return #fc.get_clients() == 0 end, 50)
  vim.cmd("qa!")
end
result.initialized = vim.wait(CFG.start_timeout_ms, function()
  local c = fc.get_clients({ bufnr = bufnr })[1]
  return c ~= nil and c.initialized == true
end, 50)
result.ready = vim.wait(CFG.ready_timeout_ms, function() return fc.status.state == "ready" end, 100)
local WAIT = {
  shown = function() if CFG.native then return shown_text() ~= nil end return ghost.visible(bufnr) end,
  hidden = function() return shown_text() == nil end,
}
local i, t0 = 0, nil
local function run()
  i = i + 1
  local s = CFG.steps[i]
  if not s then return finish() end
  if s.cursor then
    local ok, err = pcall(vim.api.nvim_win_set_cursor, 0, s.cursor)
    if not ok then  -- the buffer is not what the step expects: record it and stop
      snapshot(s.name .. " (cursor " .. tostring(err) .. ")")
      return finish()
    end
  end
  if s.keys and s.keys ~= "" then
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(s.keys, true, false, true), "t", false)
  end
  t0 = vim.loop.now()
  local function poll()
    local ok = (s["until"] == nil or s["until"] == vim.NIL) and vim.loop.now() - t0 >= (s.wait_ms or 200)
      or (WAIT[s["until"]] and WAIT[s["until"]]())
    if ok or vim.loop.now() - t0 > CFG.step_timeout_ms then
      snapshot(s.name .. (ok and "" or " (timed out)"))
      return vim.defer_fn(run, 0)
    end
    vim.defer_fn(poll, 20)
  end
  vim.defer_fn(poll, 20)
end
vim.defer_fn(run, 0)
"""


def _ghost_run(nvim_bin: str, tmp_path: Path, proj: Path, src: Path, cmd: list[str], steps: list[dict],
               init_options: dict | None = None, step_timeout_ms: int = 10000, env: dict | None = None,
               native: bool = False, global_native: bool = False) -> dict:  # fmt: skip
    out = tmp_path / "ghost.json"
    config = {"plugin_dir": str(PLUGIN_DIR), "cmd": cmd, "file": str(src), "out": str(out), "steps": steps,
              "init_options": init_options or {}, "start_timeout_ms": 120000, "ready_timeout_ms": 180000,
              "step_timeout_ms": step_timeout_ms, "native": native,
              "global_native": global_native}  # fmt: skip
    script = tmp_path / "ghost.lua"
    script.write_text(GHOST_DRIVER.replace("__CONFIG__", json.dumps(config)))
    state = tmp_path / "nvim-state"
    rc, stdout, stderr = run_nvim(nvim_bin, script, proj, state, env=env)
    res = read_result(out, rc, stdout, stderr)
    assert res["initialized"] and res["ready"], f"{res}\n{lsp_log_tail(state)}"
    res["steps"] = {step["name"]: step for step in res["steps"]}
    return res


def _area_project(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """The ghost-text tests' project: (its root, ``pkg/area.py`` with a ``return`` to complete
    and a ``print()``, the command of the fake server that answers there)."""
    proj, _ = make_project(tmp_path)
    src = proj / "pkg" / "area.py"
    src.write_text("def area(w, h):\n    return \nprint()\n")
    server = tmp_path / "fake_server.py"
    server.write_text(FAKE_SERVER)
    return proj, src, [sys.executable, str(server), str(tmp_path / "log.json")]


def test_ghost_text_as_you_type(nvim_bin: str, tmp_path: Path):
    """The plugin's own ghost text (every version; Neovim 0.12's own inline completion is an
    option, ``test_native_inline_completion``): the plugin asks for one as you type
    and draws it as virtual text (first line at the cursor, the rest as virtual lines);
    typing what it says moves it along; <M-Right> / <M-C-Right> accept a word / the line,
    <C-]> hides it, <Tab> accepts it all (replacing what its range covers right of the
    cursor: an auto-closed ``)``) and, with nothing shown, is a plain <Tab>. Against the
    stdlib fake server, whose answers are fixed per text before the cursor."""
    proj, src, fake = _area_project(tmp_path)
    steps = [
        {"name": "enter", "cursor": [2, 10], "keys": "A", "until": "shown"},
        {"name": "typed along", "keys": "w", "until": "shown"},
        {"name": "word", "keys": "<M-Right>", "until": "shown"},
        {"name": "line", "keys": "<M-C-Right>", "until": "shown"},
        {"name": "dismissed", "keys": "<C-]>", "until": "hidden"},
        {"name": "plain tab", "keys": "<Tab>", "until": None},
        {"name": "back", "keys": "<BS>", "until": "shown"},
        {"name": "accepted", "keys": "<Tab>", "until": "hidden"},
        {"name": "in brackets", "cursor": [4, 6], "keys": "", "until": "shown"},
        {"name": "replaced", "keys": "<Tab>", "until": "hidden"},
        {"name": "left", "keys": "<Esc>", "until": "hidden"},
    ]
    res = _ghost_run(nvim_bin, tmp_path, proj, src, fake, steps, step_timeout_ms=5000)
    st = res["steps"]
    assert set(st) == {s["name"] for s in steps}, list(st)  # none timed out
    (mark,) = st["enter"]["marks"]
    assert mark == {"row": 1, "col": 11, "text": "w * h", "pos": "overlay", "lines": ["# done"], "hl": "FastCoderGhost"}, mark
    assert st["enter"]["lines"][1] == "    return " and st["enter"]["mode"] == "i"
    assert st["typed along"]["ghost"] == " * h\n# done"
    assert st["word"]["lines"][1] == "    return w *" and st["word"]["ghost"] == " h\n# done"
    assert st["line"]["lines"][1] == "    return w * h" and st["line"]["ghost"] == "\n# done"
    assert st["dismissed"]["marks"] == [] and st["dismissed"]["lines"][1] == "    return w * h"
    assert st["plain tab"]["lines"][1] == "    return w * h\t" and st["plain tab"]["ghost"] is None
    (mark,) = st["back"]["marks"]  # a suggestion that starts on the next line: virtual lines only
    assert mark["text"] is None and mark["lines"] == ["# done"], mark
    assert st["accepted"]["lines"] == ["def area(w, h):", "    return w * h", "# done", "print()"]
    assert st["accepted"]["cursor"] == [3, 6]
    (mark,) = st["in brackets"]["marks"]  # inside a line: after its end before Neovim 0.10
    if parse_nvim_version(res["nvim"]) >= (0, 10):  # inline, without the ")" it replaces
        assert mark["text"] == '"h\u00e9"' and mark["pos"] == "inline" and mark["col"] == 6, mark
    else:
        assert mark["text"] == '"h\u00e9")' and mark["pos"] == "eol", mark
    assert st["replaced"]["lines"][3] == 'print("h\u00e9")'  # the ")" replaced, not doubled
    assert st["replaced"]["cursor"] == [4, len('print("h\u00e9")'.encode())]
    assert st["left"]["mode"] == "n" and st["left"]["marks"] == []
    asked = json.loads(Path(fake[-1]).read_text())["inline"]
    assert asked[0] == "    return " and "print(" in asked, asked


NATIVE_STEPS = [
    {"name": "enter", "cursor": [2, 10], "keys": "A", "until": "shown"},
    {"name": "typed along", "keys": "w", "until": "shown"},
    {"name": "accepted", "keys": "<Tab>", "until": "hidden"},
    {"name": "plain tab", "keys": "<Tab>", "until": None},
    {"name": "in brackets", "cursor": [4, 6], "keys": "<Left><Right>", "until": "shown"},
    {"name": "replaced", "keys": "<Tab>", "until": "hidden"},
    {"name": "left", "keys": "<Esc>", "until": "hidden"},
]


def test_native_inline_completion(nvim_bin: str, tmp_path: Path):
    """Neovim 0.12's own LSP inline completion (``vim.lsp.inline_completion``, the plugin's
    ``inline_completion = true``) against the stdlib fake server: shown as you type without a
    key to ask for it, moved along as you type what it says, accepted with the plugin's
    <Tab> (replacing what its range covers: an auto-closed ``)``), a plain <Tab> when
    nothing is shown, hidden on <Esc>. Skipped on Neovim before 0.12."""
    version = nvim_version(nvim_bin)
    if version < (0, 12):
        pytest.skip(f"Neovim {'.'.join(map(str, version))} has no vim.lsp.inline_completion (0.12+)")
    proj, src, fake = _area_project(tmp_path)
    res = _ghost_run(nvim_bin, tmp_path, proj, src, fake, NATIVE_STEPS,
                     step_timeout_ms=5000, native=True)  # fmt: skip
    st = res["steps"]
    assert set(st) == {s["name"] for s in NATIVE_STEPS}, list(st)  # none timed out
    (mark,) = st["enter"]["marks"]
    assert mark == {"row": 1, "col": 11, "text": "w * h", "pos": "inline", "lines": ["# done"], "hl": "ComplHint"}, mark
    assert st["typed along"]["lines"][1] == "    return w" and st["typed along"]["ghost"] == " * h\n# done"
    assert st["accepted"]["lines"] == ["def area(w, h):", "    return w * h", "# done", "print()"]
    assert st["accepted"]["cursor"] == [3, 6] and st["accepted"]["mode"] == "i"
    assert st["plain tab"]["lines"][2] == "# done\t" and st["plain tab"]["ghost"] is None
    (mark,) = st["in brackets"]["marks"]  # its range covers the ")": drawn over it
    assert mark["text"] == '"h\u00e9")' and mark["pos"] == "overlay", mark
    assert st["replaced"]["lines"][3] == 'print("h\u00e9")'  # the ")" replaced, not doubled
    assert st["replaced"]["cursor"] == [4, len('print("h\u00e9")'.encode())]
    assert st["left"]["mode"] == "n" and st["left"]["marks"] == []


def test_one_ghost_text_when_neovims_own_is_on_for_every_client(nvim_bin: str, tmp_path: Path):
    """A Neovim 0.12 config that turns on ``vim.lsp.inline_completion`` for every client (as
    users do for other servers) must not get Neovim's own suggestion drawn beside the
    plugin's, nor a second request per key: the plugin turns Neovim's own off for its client
    only. Skipped on Neovim before 0.12."""
    version = nvim_version(nvim_bin)
    if version < (0, 12):
        pytest.skip(f"Neovim {'.'.join(map(str, version))} has no vim.lsp.inline_completion (0.12+)")
    proj, src, fake = _area_project(tmp_path)
    steps = [
        {"name": "enter", "cursor": [2, 10], "keys": "A", "until": "shown"},
        {"name": "later", "keys": "", "until": None, "wait_ms": 900},  # Neovim's own asks 200 ms after a key
        {"name": "accepted", "keys": "<Tab>", "until": "hidden"},
    ]
    res = _ghost_run(nvim_bin, tmp_path, proj, src, fake, steps, step_timeout_ms=5000, global_native=True)
    st = res["steps"]
    assert set(st) == {s["name"] for s in steps}, list(st)
    assert st["later"]["ghost"] == "w * h\n# done" and st["later"]["native_marks"] == 0, st["later"]
    assert st["accepted"]["lines"] == ["def area(w, h):", "    return w * h", "# done", "print()"], st["accepted"]
    asked = json.loads(Path(fake[-1]).read_text())["inline"]
    assert asked.count("    return ") == 1, asked  # the plugin's one request there; none from Neovim's own


def test_ghost_text_with_real_server(nvim_bin: str, tmp_path: Path, request: pytest.FixtureRequest):
    """The ghost text from ``fastcoder serve`` itself (the scripted tiny model's answer at
    the end of ``MATHUTIL``), accepted with <Tab>."""
    pytest.importorskip("lsp_server.server")
    model_dir = request.getfixturevalue("nvim_model_dir")
    proj, src = make_project(tmp_path)
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    steps = [
        {"name": "enter", "cursor": [13, 10], "keys": "A", "until": "shown"},
        {"name": "accepted", "keys": "<Tab>", "until": "hidden"},
    ]
    res = _ghost_run(nvim_bin, tmp_path, proj, src, [sys.executable, "-m", "fastcoder_cli", "serve"], steps,
                     init_options={"model": str(model_dir), "dtype": "float32", "maxNewTokens": 8},
                     step_timeout_ms=60000, env={"PYTHONPATH": pythonpath})  # fmt: skip
    st = res["steps"]
    assert set(st) == {"enter", "accepted"}, list(st)
    assert st["enter"]["ghost"] == COMPLETION_ANSWER, st["enter"]
    assert st["accepted"]["lines"][12] == "    return " + COMPLETION_ANSWER, st["accepted"]


def test_completion_with_real_server(nvim_bin: str, tmp_path: Path, request: pytest.FixtureRequest):
    """`fastcoder serve` on the tiny model answers textDocument/completion inside Neovim,
    and its "Generate function body" code action is resolved and applied by Neovim's own
    ``vim.lsp.buf.code_action()``."""
    pytest.importorskip("lsp_server.server")
    model_dir = request.getfixturevalue("nvim_model_dir")
    proj, src = make_project(tmp_path)
    stubs = proj / "pkg" / "stubs.py"
    stubs.write_text(STUBS)
    out = tmp_path / "result.json"
    script = client_script(
        tmp_path,
        plugin_dir=str(PLUGIN_DIR),
        cmd=[sys.executable, "-m", "fastcoder_cli", "serve"],
        init_options={"model": str(model_dir), "dtype": "float32", "maxNewTokens": 8},
        file=str(src),
        line=12,
        out=str(out),
        start_timeout_ms=120000,
        ready_timeout_ms=180000,
        request_timeout_ms=60000,
        extra=False,
        stub_file=str(stubs),
    )
    # the server must import the repo's packages even if they are not installed
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    state = tmp_path / "nvim-state"
    rc, stdout, stderr = run_nvim(nvim_bin, script, proj, state, env={"PYTHONPATH": pythonpath})
    res = read_result(out, rc, stdout, stderr)
    where = f"nvim {res.get('nvim')}; server log:\n{lsp_log_tail(state)}"
    assert res["ok"], (
        f"{res.get('error')} steps={res.get('steps')} notes={res.get('notes')}\nstderr:\n{stderr[-3000:]}\n{where}"
    )
    assert res["status"]["state"] != "error", f"{res['status']}\n{where}"
    assert not res["errors"], f"{res['errors']}\n{where}"
    assert res["n_items"] == 1 and res["labels"] == [COMPLETION_ANSWER], f"completion items: {res}\n{where}"
    # the code action, resolved and applied by Neovim itself: `pass` replaced by a body
    assert res["actions_offered"] == ["Generate function body (FastCoder)"], f"{res}\n{where}"
    after = res["stub_after"]
    assert after[:2] == ["def double(x):", "    " + BODY_ANSWER], f"{after}\n{where}"
