-- Lua-level smoke test of the FastCoder Neovim plugin without a server.
-- Run from anywhere:
--   nvim --headless -u NONE -c "luafile editor-client/nvim/tests/smoke.lua"
-- Exits 0 when every check passes, 1 otherwise (messages on stderr and in
-- $FASTCODER_SMOKE_OUT as JSON when that is set).

local script = debug.getinfo(1, "S").source:sub(2)
local plugin_dir = vim.fn.fnamemodify(script, ":p:h:h")
vim.opt.runtimepath:prepend(plugin_dir)

local results = { ok = true, checks = {}, version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) .. "." .. tostring(vim.version().patch) }
local function check(name, cond, detail)
  table.insert(results.checks, { name = name, ok = cond and true or false, detail = detail and tostring(detail) or nil })
  if not cond then
    results.ok = false
  end
end

local notes = {}
local orig_notify = vim.notify
vim.notify = function(msg, level)
  table.insert(notes, { msg = tostring(msg), level = level })
end

local ok, err = pcall(function()
  local fc = require("fastcoder")

  -- config merging: lists replaced, dicts merged
  local cfg = fc.merge_config({ filetypes = { "python" }, cmd = { "x" }, init_options = { maxNewTokens = 8 }, keymaps = { trigger = "<C-Space>" } })
  check("merge: filetypes replaced", #cfg.filetypes == 1 and cfg.filetypes[1] == "python")
  check("merge: cmd replaced", #cfg.cmd == 1 and cfg.cmd[1] == "x")
  check("merge: init_options", cfg.init_options.maxNewTokens == 8)
  check("merge: keymaps merged", cfg.keymaps.trigger == "<C-Space>" and cfg.keymaps.accept == "<Tab>")

  -- the ghost text's partial accepts
  local ghost = require("fastcoder.ghost")
  check("ghost: a word", ghost.piece("  total(xs) + 1", "word") == "  total")
  check("ghost: symbols", ghost.piece("(xs) + 1", "word") == "(")
  check("ghost: next line's word", ghost.piece("\n    return x", "word") == "\n    return")
  check("ghost: the line", ghost.piece("a = 1\nb = 2", "line") == "a = 1")
  check("ghost: the next line", ghost.piece("\nb = 2\nc", "line") == "\nb = 2")
  check("ghost: all", ghost.piece("a\nb", "all") == "a\nb")

  -- a multi-line completion item made whole at CompleteDone (what 0.7 / 0.10+ insert of it)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_set_current_buf(buf)
  local virtualedit = vim.o.virtualedit
  vim.o.virtualedit = "onemore" -- the cursor at a line's end, as in insert mode
  local function at(lines, row, col)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.api.nvim_win_set_cursor(0, { row, col })
  end
  local args = { label = "x,", insertTextFormat = 1, textEdit = { newText = "\n    x,\n    y,\n" } }
  local item = { word = "", user_data = { nvim = { lsp = { completion_item = args } } } }
  at({ "y = f(a)" }, 1, 6) -- 0.10+: only the first line (here nothing) was inserted
  check("lines: first line only -> whole", fc.split_completed_lines(buf, item, "accept")
    and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), { "y = f(", "    x,", "    y,", "a)" })
    and vim.deep_equal(vim.api.nvim_win_get_cursor(0), { 4, 0 }), vim.inspect(vim.api.nvim_buf_get_lines(buf, 0, -1, false)))
  at({ "y = f(a)" }, 1, 6)
  check("lines: a cancelled completion is left alone", not fc.split_completed_lines(buf, item, "cancel")
    and vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == "y = f(a)")
  at({ "y = f(\0    x,a)" }, 1, 13) -- 0.7: the item's text with a NUL for each break
  local nul = { word = "\n    x,", user_data = { nvim = { lsp = { completion_item = { label = "x", insertText = "\n    x," } } } } }
  check("lines: NUL-joined -> lines", fc.split_completed_lines(buf, nul, nil)
    and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), { "y = f(", "    x,a)" }))
  at({ "y = f(zz)" }, 1, 8) -- what is before the cursor is not what was inserted
  local other = { word = "q", user_data = { nvim = { lsp = { completion_item = { label = "q", insertText = "q\nr" } } } } }
  check("lines: not the inserted word -> untouched", not fc.split_completed_lines(buf, other, "accept")
    and vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == "y = f(zz)")

  -- Neovim 0.12's inline item accepted over what was typed since it was asked for (a range
  -- object is anything with :to_extmark())
  local function range(sr, sc, er, ec)
    return { to_extmark = function() return sr, sc, er, ec end }
  end
  at({ "    return w", "x" }, 1, 12) -- asked at col 11, "w" typed since
  local suggestion = { insert_text = "w * h\n# done", range = range(0, 11, 0, 11) }
  check("native: typed along -> applied over it", fc.accept_caught_up(buf, suggestion) == nil
    and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), { "    return w * h", "# done", "x" })
    and vim.deep_equal(vim.api.nvim_win_get_cursor(0), { 2, 6 }), vim.inspect(vim.api.nvim_buf_get_lines(buf, 0, -1, false)))
  at({ 'print(")' }, 1, 7) -- asked at col 6 with ")" covered, '"' typed since: ")" moved right
  check("native: covered text moved along", fc.accept_caught_up(buf, { insert_text = '"a")', range = range(0, 6, 0, 7) }) == nil
    and vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == 'print("a")', vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1])
  at({ "    return q" }, 1, 12) -- typed something else: nothing applied
  check("native: typed away -> nothing", fc.accept_caught_up(buf, { insert_text = "w * h", range = range(0, 11, 0, 11) }) == nil
    and vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == "    return q")
  at({ "    return " }, 1, 11) -- nothing typed: Neovim applies it itself
  local same = { insert_text = "w", range = range(0, 11, 0, 11) }
  check("native: nothing typed -> Neovim's own accept", fc.accept_caught_up(buf, same) == same
    and vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == "    return ")
  vim.api.nvim_buf_delete(buf, { force = true })
  vim.o.virtualedit = virtualedit

  -- setup with a missing binary must not raise
  local missing = "/nonexistent/dir/fastcoder-missing"
  local setup_ok, setup_err = pcall(fc.setup, { cmd = { missing, "serve" }, filetypes = { "python" } })
  check("setup with a missing binary does not error", setup_ok, setup_err)

  -- opening a python buffer triggers attach -> notification, no crash, no client
  local tmp = vim.fn.tempname()
  vim.fn.mkdir(tmp .. "/proj/pkg", "p")
  vim.fn.writefile({ "[project]", 'name = "x"' }, tmp .. "/proj/pyproject.toml")
  vim.fn.writefile({ "def add(a, b):", "    return " }, tmp .. "/proj/pkg/mod.py")
  local open_ok, open_err = pcall(vim.cmd, "edit " .. tmp .. "/proj/pkg/mod.py")
  check("edit works", open_ok, open_err)
  local ft_ok, ft_err = pcall(function()
    vim.bo.filetype = "python"
  end)
  check("FileType autocmd does not error", ft_ok, ft_err)
  local found = false
  for _, n in ipairs(notes) do
    if n.msg:find(missing, 1, true) and n.level == vim.log.levels.ERROR then
      found = true
    end
  end
  check("missing binary gives an error notification", found, vim.inspect(notes))
  check("status is error", fc.status.state == "error", vim.inspect(fc.status))
  check("no client started", #fc.get_clients() == 0)

  -- second buffer: the message is not repeated
  local before = #notes
  vim.cmd("enew")
  vim.bo.filetype = "python"
  check("missing-binary message shown once", #notes == before, vim.inspect(notes))

  -- root detection
  check("root from pyproject.toml", fc.find_root(vim.fn.bufnr(tmp .. "/proj/pkg/mod.py")) == tmp .. "/proj", fc.find_root(vim.fn.bufnr(tmp .. "/proj/pkg/mod.py")))
  check("root falls back to cwd for unnamed buffers", fc.find_root(vim.api.nvim_get_current_buf()) == vim.fn.getcwd())

  -- status handler
  fc.on_status(nil, { state = "loading", message = "loading model" }, { client_id = 1 })
  check("status handler stores state", fc.status.state == "loading" and fc.status.message == "loading model")
  check("vim.g.fastcoder_status", vim.g.fastcoder_status == "loading")
  fc.on_status(nil, "garbage", {})
  check("malformed status ignored", fc.status.state == "loading")
  check("statusline", fc.statusline() == "FastCoder: loading")

  -- user commands exist and run without a server
  for _, name in ipairs({ "FastCoderStatus", "FastCoderStats", "FastCoderRebuildIndex", "FastCoderEnable", "FastCoderDisable", "FastCoderEdit" }) do
    check("command " .. name .. " exists", vim.fn.exists(":" .. name) == 2)
  end
  local st_ok, st_err = pcall(vim.cmd, "FastCoderStatus")
  check(":FastCoderStatus runs", st_ok, st_err)
  check(":FastCoderStatus shows the state", notes[#notes] and notes[#notes].msg:find("loading model", 1, true) ~= nil, vim.inspect(notes[#notes]))
  local stats_ok, stats_err = pcall(vim.cmd, "FastCoderStats")
  check(":FastCoderStats without a server only warns", stats_ok, stats_err)
  local en_ok, en_err = pcall(vim.cmd, "FastCoderDisable")
  check(":FastCoderDisable without a server", en_ok and fc.config.init_options.enabled == false, en_err)

  -- setup() again (re-configure) is fine
  local again_ok, again_err = pcall(fc.setup, { cmd = { missing, "serve" } })
  check("setup twice", again_ok, again_err)
  local bad_ok, bad_err = pcall(fc.setup, { cmd = "fastcoder serve" })
  check("a wrongly typed option is a clear error", not bad_ok and tostring(bad_err):find("cmd", 1, true) ~= nil, bad_err)
  check("inline completion detection is a boolean", type(fc.has_inline_completion()) == "boolean")
  local deprecations = {}
  for _, n in ipairs(notes) do
    if n.msg:lower():find("deprecat", 1, true) then
      table.insert(deprecations, n.msg)
    end
  end
  check("no deprecation warnings", #deprecations == 0, vim.inspect(deprecations))
end)
check("no Lua error", ok, err)
results.notes = notes

vim.notify = orig_notify
local out = os.getenv("FASTCODER_SMOKE_OUT")
if out and out ~= "" then
  local f = io.open(out, "w")
  f:write(vim.fn.json_encode(results))
  f:close()
end
for _, c in ipairs(results.checks) do
  if not c.ok then
    io.stderr:write("FAIL " .. c.name .. (c.detail and (": " .. c.detail) or "") .. "\n")
  end
end
io.stderr:write(string.format("nvim %s: %d checks, %s\n", results.version, #results.checks, results.ok and "all passed" or "FAILED"))
vim.cmd(results.ok and "qa!" or "cquit!")
