"""Forty-second session: live typing in Neovim 0.12, its own LSP inline completion
(``vim.lsp.inline_completion``, the plugin's default there) against the plugin's ghost text
(``inline_completion = false``), both on the real server and model (``--method fastcoder``).

The forty-first session's probe (docs/bench/probes-s41/nvim_live.py: the replay's keystroke
script applied in insert mode at its real times, a fresh Neovim and server per run) with two
changes: the Neovim (``--nvim``, default Debian's 0.12 from tests/neovim_debian.py) and what
counts as shown. Neovim's own inline completion redraws its last item after every key with
as many characters skipped as the cursor moved, whether or not they were typed as it says;
a key counts as shown only when the item on screen is consistent with the buffer (the text
from the item's range start to the cursor is the start of the item's text). Variants
alternate per file::

    python docs/bench/probes-s42/nvim_live_native.py [--files 4] [--max-keys 150] [--variants native,plugin]
"""

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests"))
spec = importlib.util.spec_from_file_location("nvim_live", REPO / "docs/bench/probes-s41/nvim_live.py")
live = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live)

SETUP = 'fc.setup({ cmd = CFG.cmd, init_options = CFG.init_options, filetypes = { "python" } })'
VISIBLE = """    if rec.shown == vim.NIL and ghost.visible(bufnr) and vim.api.nvim_buf_get_changedtick(bufnr) == tick then
      rec.shown = elapsed
      local g = ghost.current(bufnr)
      rec.text = g and g.text or vim.NIL
    end"""
NATIVE_VISIBLE = """    if rec.shown == vim.NIL and vim.api.nvim_buf_get_changedtick(bufnr) == tick then
      local text = CFG.native and native_shown() or (ghost.visible(bufnr) and ghost.current(bufnr).text) or nil
      if text then rec.shown = elapsed; rec.text = text end
    end"""
NATIVE_HELPERS = """
-- Neovim's own inline completion: its current item (an upvalue of vim.lsp.inline_completion.get)
local ic = vim.lsp.inline_completion
local Completor
for n = 1, 40 do
  local name, value = debug.getupvalue(ic.get, n)
  if name == nil then break end
  if name == "Completor" then Completor = value end
end
assert(Completor, "vim.lsp.inline_completion has no Completor upvalue here")
local function native_shown()
  local ns = vim.api.nvim_get_namespaces()["nvim.lsp.inline_completion"]
  local c = Completor.active[bufnr]
  if not ns or not c or not c.current or type(c.current.insert_text) ~= "string" then return nil end
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })
  if #marks == 0 then return nil end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local srow, scol = c.current.range:to_extmark()
  if srow ~= row - 1 or col < scol then return nil end
  local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  local typed = line:sub(scol + 1, col)
  if c.current.insert_text:sub(1, #typed) ~= typed then return nil end
  return c.current.insert_text:sub(#typed + 1)
end
"""


def driver(native: bool) -> str:
    d = live.DRIVER
    assert SETUP in d and VISIBLE in d
    d = d.replace(SETUP, SETUP[:-3] + ", inline_completion = CFG.native })")
    d = d.replace(VISIBLE, NATIVE_VISIBLE)
    d = d.replace('local ghost = require("fastcoder.ghost")\n', 'local ghost = require("fastcoder.ghost")\n' + NATIVE_HELPERS)
    # 0.11+ clients are objects: c:request / cl:stop (the s41 driver ran on 0.7)
    d = d.replace("c.request(", "c:request(").replace("cl.stop()", "cl:stop()")
    return d.replace("local CFG = vim.fn.json_decode([==[__CONFIG__]==])",
                     "local CFG = vim.fn.json_decode([==[__CONFIG__]==])\nCFG.native = " + ("true" if native else "false"))


def main() -> int:
    import neovim_debian

    ap = argparse.ArgumentParser()
    live.add_typing_args(ap)
    ap.add_argument("--nvim", default=None, help="Neovim 0.12+ (default: Debian's, tests/neovim_debian.py)")
    ap.add_argument("--variants", default="native,plugin")
    argv = sys.argv[1:] + ([] if "--dtype" in sys.argv else ["--dtype", "auto"])
    argv += [] if "--methods" in sys.argv else ["--methods", "fastcoder"]
    args = ap.parse_args(argv)
    if "--first-pause" not in sys.argv:
        args.first_pause = 3.0
    nvim = args.nvim or str(neovim_debian.ensure("0.12"))
    variants = args.variants.split(",")
    tasks = live._tasks(args)
    tmp = Path(tempfile.mkdtemp(prefix="nvim-live-native-"))
    by_variant = {v: [] for v in variants}
    print(f"nvim {nvim}; method {args.methods}; load average before: {live.load_average()}")
    for n, task in enumerate(tasks):
        order = variants[n % len(variants):] + variants[: n % len(variants)]
        for v in order:
            res = live.run(nvim, task, args.methods, args, tmp / v, driver=driver(v == "native"))
            live.print_run(task, v, res)
            by_variant[v].append(res)
    print()
    live.print_table(by_variant, "variant")
    print(f"load average after: {live.load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
