"""Forty-first session: live typing in Neovim 0.7.2 with the plugin's ghost text
(editor-client/nvim, ``fastcoder.ghost``) against the real server and model.

``fastcoder bench live`` drives the server as VS Code does; this drives the real client
Neovim users have before 0.12: a headless Neovim with the plugin, the replay's keystroke
script (the same tasks, seeded gaps, auto-indent and auto-closed brackets) applied in insert
mode at its real times from timers, each key an edit of the buffer (Neovim then sends
``didChange`` and the plugin asks for ``textDocument/inlineCompletion`` as it would for a
typed key). Per key: when the ghost text for the buffer after it was first visible, if before
the next key. Methods (a fresh Neovim and server each) alternate per file::

    python docs/bench/probes-s41/nvim_live.py [--files 4] [--max-keys 150] [--methods ar,fastcoder]

Prints per method: keys with a ghost text before the next key; the latency of the shown
ones the server had to answer (not moved along by typing, > 20 ms); at pauses of 500 ms or
more, the felt latency (0 when the ghost was moved along) and the share shown.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.replay import _tasks, add_typing_args, keystrokes, load_average

REPO = Path(__file__).resolve().parents[3]
PLUGIN = REPO / "editor-client" / "nvim"

DRIVER = r"""
local CFG = vim.fn.json_decode([==[__CONFIG__]==])
vim.opt.runtimepath:prepend(CFG.plugin_dir)
vim.o.swapfile = false
vim.o.autoindent = false
local fc = require("fastcoder")
fc.setup({ cmd = CFG.cmd, init_options = CFG.init_options, filetypes = { "python" } })
for _, other in ipairs(CFG.others) do vim.cmd("edit " .. vim.fn.fnameescape(other)); vim.bo.filetype = "python" end
vim.cmd("edit " .. vim.fn.fnameescape(CFG.file))
vim.bo.filetype = "python"
local bufnr = vim.api.nvim_get_current_buf()
local ghost = require("fastcoder.ghost")
local uv = vim.loop
local result = { keys = {} }
local function now() return uv.hrtime() / 1e6 end
local function finish()
  local c = fc.get_clients({ bufnr = bufnr })[1]
  local stats
  if c then
    c.request("workspace/executeCommand", { command = "fastcoder.stats", arguments = {} }, function(_, r) stats = r end, bufnr)
    vim.wait(10000, function() return stats ~= nil end, 20)
  end
  result.stats = stats
  result.text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  local f = io.open(CFG.out, "w"); f:write(vim.fn.json_encode(result)); f:close()
  for _, cl in ipairs(fc.get_clients()) do cl.stop() end
  vim.wait(3000, function() return #fc.get_clients() == 0 end, 50)
  vim.cmd("qa!")
end
local t_start = now()
result.ready = vim.wait(CFG.ready_ms, function() return fc.status.state == "ready" end, 50)
result.ready_s = (now() - t_start) / 1000
vim.api.nvim_win_set_cursor(0, CFG.cursor)
vim.cmd("startinsert")
-- the cursor moved n characters on through the buffer
local function advance(row, col, n)
  for _ = 1, n do
    local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
    if col < #line then
      local c = line:byte(col + 1)
      local width = c >= 240 and 4 or c >= 224 and 3 or c >= 192 and 2 or 1
      col = col + width
    else
      row, col = row + 1, 0
    end
  end
  return row, col
end
local i = 0
local function key()
  i = i + 1
  local k = CFG.keys[i]
  if not k then return vim.defer_fn(finish, 0) end
  if i == 1 then vim.api.nvim_win_set_cursor(0, CFG.cursor) end -- in insert mode: the line's end is a place
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  if k.insert ~= "" then
    vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, vim.split(k.insert, "\n", { plain = true }))
  end
  row, col = advance(row, col, k.cursor_after)
  vim.api.nvim_win_set_cursor(0, { row, col })
  local t = now()
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local rec = { gap = k.gap, shown = vim.NIL }
  table.insert(result.keys, rec)
  local function poll()
    local elapsed = now() - t
    if rec.shown == vim.NIL and ghost.visible(bufnr) and vim.api.nvim_buf_get_changedtick(bufnr) == tick then
      rec.shown = elapsed
      local g = ghost.current(bufnr)
      rec.text = g and g.text or vim.NIL
    end
    if elapsed >= k.gap * 1000 then return key() end
    vim.defer_fn(poll, 4)
  end
  vim.defer_fn(poll, 0)
end
vim.defer_fn(key, CFG.first_pause_ms)
"""


def run(nvim: str, task, method: str, args, tmp: Path, driver: str = DRIVER) -> dict:
    ws = tmp / f"{method}-{task.path.stem}" / "project"
    ws.mkdir(parents=True)
    src = ws / task.path.name
    src.write_text(task.before + task.after)
    others = []
    for other in task.others:
        (ws / other.name).write_text(other.read_text(encoding="utf-8"))
        others.append(str(ws / other.name))
    script = keystrokes(task.body, random.Random(args.seed), autoclose=True)
    if args.max_keys:
        script = script[: args.max_keys]
    row = task.before.count("\n") + 1
    col = len(task.before[task.before.rfind("\n") + 1 :].encode())
    out = tmp / f"{method}-{task.path.stem}.json"
    cfg = {"plugin_dir": str(PLUGIN), "cmd": [sys.executable, "-m", "fastcoder_cli", "serve", "--model", args.model,
           "--dtype", args.dtype, "--method", method], "init_options": {}, "file": str(src), "others": others,
           "cursor": [row, col], "out": str(out), "ready_ms": 600000, "first_pause_ms": int(args.first_pause * 1000),
           "keys": [{"insert": k.insert, "cursor_after": k.cursor_after, "gap": k.gap} for k in script]}  # fmt: skip
    lua = tmp / f"{method}-{task.path.stem}.lua"
    lua.write_text(driver.replace("__CONFIG__", json.dumps(cfg)))
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_STATE_HOME=str(tmp / "state"), XDG_DATA_HOME=str(tmp / "data"))
    subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {lua}"], cwd=ws, env=env,
                   timeout=900, stdin=subprocess.DEVNULL, capture_output=True)  # fmt: skip
    res = json.loads(out.read_text())
    want = task.before + task.body[: script[-1].at + len(script[-1].typed)] + script[-1].right + task.after
    res["diverged"] = res["text"].rstrip("\n") != want.rstrip("\n")
    return res


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def main() -> int:
    ap = argparse.ArgumentParser()
    add_typing_args(ap)
    args = ap.parse_args(sys.argv[1:] + ([] if "--dtype" in sys.argv else ["--dtype", "auto"]))
    if "--first-pause" not in sys.argv:
        args.first_pause = 3.0
    nvim = shutil.which("nvim")
    tasks = _tasks(args)
    methods = args.methods.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="nvim-live-"))
    by_method = {m: [] for m in methods}
    print(f"load average before: {load_average()}")
    for n, task in enumerate(tasks):
        order = methods[n % len(methods):] + methods[: n % len(methods)]
        for m in order:
            res = run(nvim, task, m, args, tmp)
            print_run(task, m, res)
            by_method[m].append(res)
    print()
    print_table(by_method, "method")
    print(f"load average after: {load_average()}")
    return 0


def print_run(task, name: str, res: dict) -> None:
    """A line per run: keys with a ghost text before the next, time to ready, the buffer."""
    keys = res["keys"]
    shown = [k for k in keys if k["shown"] is not None]
    print(f"{task.name} {name}: {len(keys)} keys, ghost before the next key {len(shown)}/{len(keys)}, ready {res['ready_s']:.1f} s,"
          f" buffer {'DIVERGED' if res['diverged'] else 'as scripted'}; load {load_average()}")  # fmt: skip


def print_table(by_name: dict, label: str) -> None:
    """The summary, a row per method (or variant): ``by_name`` maps it to its runs' results."""
    print(f"| {label} | keys with ghost text before the next key | shown after a model answer: p50 / p95 ms (n) | at pauses >= 500 ms: felt p50 / p95 ms, shown | model runs |")
    print("|---|---|---|---|---|")
    for m, runs in by_name.items():
        keys = [k for r in runs for k in r["keys"]]
        shown = [k for k in keys if k["shown"] is not None]
        answered = [k["shown"] for k in shown if k["shown"] > 20]
        pauses = [k for k in keys if k["gap"] >= 0.5]
        felt = [k["shown"] for k in pauses if k["shown"] is not None]
        runs_n = sum(int(((r.get("stats") or {}).get("total") or {}).get("generations", 0)) for r in runs)
        f = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        print(f"| {m} | {100 * len(shown) / max(1, len(keys)):.0f}% of {len(keys)} | {f(pct(answered, 0.5))} / {f(pct(answered, 0.95))} ({len(answered)})"
              f" | {f(pct(felt, 0.5))} / {f(pct(felt, 0.95))}, {100 * len(felt) / max(1, len(pauses)):.0f}% of {len(pauses)} | {runs_n} |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
