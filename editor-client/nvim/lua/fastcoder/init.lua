-- FastCoder: AI code completion for Neovim through the FastCoder language server.
--
--   require("fastcoder").setup({
--     cmd = { "fastcoder", "serve" },
--     init_options = { model = "qwen2.5-coder-0.5b", maxNewTokens = 128 },
--     filetypes = { "python", "lua" },
--   })
--
-- Works on Neovim 0.7 (vim.lsp.start_client, omnifunc and the plugin's own ghost text,
-- fastcoder.ghost) up to 0.12+ (vim.lsp.start; Neovim's own LSP inline completion as an
-- option). See editor-client/README.md.

local M = {}

local uv = vim.uv or vim.loop
local levels = vim.log.levels

M.defaults = {
  -- Command that starts the server (stdio). `python -m fastcoder_cli serve` also works:
  --   cmd = { "/path/to/venv/bin/python", "-m", "fastcoder_cli", "serve" }
  cmd = { "fastcoder", "serve" },
  -- Sent as LSP initializationOptions (camelCase keys, see the README):
  -- model, dtype, device, method, maxNewTokens, timeBudgetMs, enabled, pythonPath.
  init_options = {},
  -- Sent as workspace/didChangeConfiguration { settings = { fastcoder = ... } } and used to
  -- answer workspace/configuration. nil: same as init_options.
  settings = nil,
  filetypes = {
    "python", "javascript", "javascriptreact", "typescript", "typescriptreact",
    "go", "rust", "java", "c", "cpp", "cs", "ruby", "php", "lua", "sh",
    "kotlin", "scala", "swift",
  },
  -- root_dir = nearest parent with one of these, else the current directory.
  root_markers = { ".git", "pyproject.toml" },
  name = "fastcoder",
  -- Neovim >= 0.12: use Neovim's own vim.lsp.inline_completion for ghost text instead of the
  -- plugin's. Off by default: in live typing on 0.12.4 it showed a suggestion before the next
  -- key at 62% of keys against the plugin's 81%, 287 against 160 ms p50 after a model answer
  -- (it waits 200 ms after every key before asking; docs/bench/probes-s42/nvim_live_native.py).
  inline_completion = false,
  -- The plugin's own ghost text (every version; on 0.12 unless inline_completion): asked for
  -- as you type (textDocument/inlineCompletion) and drawn as virtual text (fastcoder.ghost).
  ghost_text = true,
  -- Tell the server where the cursor rests (fastcoder/cursor) once it has not moved for
  -- this many ms, so it prepares the suggestion there (server setting warmAtCursor).
  -- false or 0: never.
  cursor_rest_ms = 300,
  -- Set 'omnifunc' to v:lua.vim.lsp.omnifunc in attached buffers (<C-x><C-o>).
  omnifunc = true,
  -- Insert-mode keys; set one to false to skip that mapping.
  keymaps = {
    accept = "<Tab>", -- accept the inline suggestion (ghost text), else a normal <Tab>
    accept_word = "<M-Right>", -- (ghost_text) accept its next word
    accept_line = "<M-C-Right>", -- (ghost_text) accept the rest of its line (or its next line)
    dismiss = "<C-]>", -- (ghost_text) hide it
    next = "<M-]>", -- (>= 0.12) next inline suggestion
    prev = "<M-[>", -- (>= 0.12) previous inline suggestion
    trigger = "<M-\\>", -- request completions now (omni completion, any version)
  },
  -- Extra client capabilities / callbacks.
  capabilities = nil,
  on_attach = nil, -- function(client, bufnr)
  on_init = nil, -- function(client) after initialize
  on_status = nil, -- function(status) on every fastcoder/status notification
  -- Notify (vim.notify) when the server reports state "error".
  notify_errors = true,
}

M.config = vim.deepcopy(M.defaults)

-- Last `fastcoder/status` notification ({ state, message, client_id, time }).
M.status = { state = "stopped", message = "server not started" }

local clients_by_root = {} -- fallback path (< 0.8): root_dir -> client id
local warned = {} -- messages already shown once
local did_setup = false

-------------------------------------------------------------------------------
-- helpers
-------------------------------------------------------------------------------

local function has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

local function notify(msg, level, once_key)
  if once_key then
    if warned[once_key] then
      return
    end
    warned[once_key] = true
  end
  vim.notify("[fastcoder] " .. msg, level or levels.INFO)
end

--- True when this Neovim has native LSP inline completion (0.12+).
function M.has_inline_completion()
  local ok, ic = pcall(function()
    return vim.lsp.inline_completion
  end)
  return ok and type(ic) == "table" and type(ic.enable) == "function"
end

local function get_clients(filter)
  filter = filter or {}
  local name = M.config.name
  local out = {}
  if vim.lsp.get_clients then
    out = vim.lsp.get_clients({ name = name, bufnr = filter.bufnr })
  else
    local all = filter.bufnr and vim.lsp.buf_get_clients(filter.bufnr) or vim.lsp.get_active_clients()
    for _, client in pairs(all) do
      if client.name == name then
        table.insert(out, client)
      end
    end
  end
  return out
end
M.get_clients = get_clients

local function client_request(client, method, params, handler, bufnr)
  if has("0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_notify(client, method, params)
  if has("0.11") then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function client_stop(client, force)
  if has("0.11") then
    return client:stop(force)
  end
  return client.stop(force)
end

local function is_stopped(client)
  if has("0.11") then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- Directory of the nearest parent of the buffer's file holding a root marker, else cwd.
function M.find_root(bufnr, markers)
  markers = markers or M.config.root_markers
  local name = vim.api.nvim_buf_get_name(bufnr or 0)
  local cwd = vim.fn.getcwd()
  if name == "" or name:match("^%a[%w+.-]*://") then
    return cwd
  end
  local dir = vim.fn.fnamemodify(name, ":p:h")
  while dir and dir ~= "" do
    for _, marker in ipairs(markers) do
      if uv.fs_stat(dir .. "/" .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return cwd
end

--- nil when cmd[1] can be executed, else an error message.
function M.check_cmd(cmd)
  if type(cmd) ~= "table" or type(cmd[1]) ~= "string" or cmd[1] == "" then
    return "setup({ cmd = ... }) must be a list of strings, e.g. { \"fastcoder\", \"serve\" }"
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    return string.format(
      "cannot start the server: `%s` was not found or is not executable. Install FastCoder "
        .. "(pip install fastcoder) or pass cmd = { \"/path/to/fastcoder\", \"serve\" } "
        .. "(or { \"/path/to/python\", \"-m\", \"fastcoder_cli\", \"serve\" }) to require(\"fastcoder\").setup().",
      cmd[1]
    )
  end
  return nil
end

local function set_status(state, message, client_id)
  M.status = { state = state, message = message or "", client_id = client_id, time = os.time() }
  vim.g.fastcoder_status = state
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "FastCoderStatus", modeline = false })
  if type(M.config.on_status) == "function" then
    pcall(M.config.on_status, M.status)
  end
end

--- Handler for the server's `fastcoder/status` notification.
function M.on_status(err, result, ctx)
  if err or type(result) ~= "table" or result.state == nil then
    return
  end
  local state = tostring(result.state)
  local message = type(result.message) == "string" and result.message or ""
  set_status(state, message, ctx and ctx.client_id)
  if state == "error" and M.config.notify_errors then
    notify("server error: " .. message, levels.ERROR)
  end
end

--- Short text for a statusline, e.g. "FastCoder: ready".
function M.statusline()
  return "FastCoder: " .. (M.status.state or "?")
end

local function settings_table()
  local s = M.config.settings
  if s == nil then
    s = M.config.init_options
  end
  return { fastcoder = s or {} }
end

-------------------------------------------------------------------------------
-- attaching
-------------------------------------------------------------------------------

local function utf16_len(line)
  if has("0.11") then
    return vim.str_utfindex(line, "utf-16")
  end
  local _, utf16 = vim.str_utfindex(line)
  return utf16
end

local cursor_timers = {} -- bufnr -> the rest timer of its cursor watch

--- Tell the server where the cursor rests in `bufnr` (`fastcoder/cursor`), once it has not
--- moved for `delay` ms: it prepares the suggestion there (setting warmAtCursor), so the
--- first keystroke after a jump in a long file does not wait for the whole prompt's
--- prefill. The same place (and text) is not sent twice in a row.
local function watch_cursor(client, bufnr, delay)
  if cursor_timers[bufnr] then
    cursor_timers[bufnr]:stop()
    cursor_timers[bufnr]:close()
  end
  local timer = uv.new_timer()
  cursor_timers[bufnr] = timer
  local last
  local group = vim.api.nvim_create_augroup("FastCoderCursor" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      local tick = vim.api.nvim_buf_get_changedtick(bufnr)
      timer:stop()
      timer:start(delay, 0, vim.schedule_wrap(function()
        if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr then
          return
        end
        if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick or is_stopped(client) then
          return -- typed on (that edit's own CursorMovedI arms the timer again) or gone
        end
        local row, col = unpack(vim.api.nvim_win_get_cursor(0))
        local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
        local character = utf16_len(line:sub(1, col))
        local key = string.format("%d:%d:%d", tick, row, character)
        if key == last then
          return
        end
        last = key
        client_notify(client, "fastcoder/cursor", {
          textDocument = { uri = vim.uri_from_bufnr(bufnr) },
          position = { line = row - 1, character = character },
        })
      end))
    end,
  })
  vim.api.nvim_create_autocmd("BufUnload", {
    group = group,
    buffer = bufnr,
    once = true,
    callback = function()
      if cursor_timers[bufnr] == timer then
        cursor_timers[bufnr] = nil
      end
      timer:stop()
      timer:close()
      pcall(vim.api.nvim_del_augroup_by_id, group)
    end,
  })
end

local function map(bufnr, lhs, rhs, desc, opts)
  if not lhs or lhs == "" then
    return
  end
  opts = vim.tbl_extend("force", { buffer = bufnr, silent = true, desc = desc }, opts or {})
  vim.keymap.set("i", lhs, rhs, opts)
end

--- The whole text a completion item stands for when it spans lines: its LSP item's plain-text
--- edit (textEdit.newText, else insertText), else the word Neovim inserted; nil for one line.
local function multiline_text(completed)
  local ud = type(completed.user_data) == "table" and completed.user_data or {}
  local item = type(ud.nvim) == "table" and type(ud.nvim.lsp) == "table" and ud.nvim.lsp.completion_item or nil
  local text
  if type(item) == "table" and item.insertTextFormat ~= 2 then
    local edit = type(item.textEdit) == "table" and item.textEdit or {}
    text = type(edit.newText) == "string" and edit.newText or item.insertText
  end
  if type(text) ~= "string" then
    text = type(completed.word) == "string" and completed.word:gsub("%z", "\n") or nil
  end
  if text and text:find("\n", 1, true) then
    return (text:gsub("\r\n?", "\n"))
  end
  return nil
end

--- Insert-mode completion cannot insert a line break, so a multi-line item (a block, or a
--- call's arguments on lines of their own) does not arrive whole: Neovim 0.7 inserts the
--- item's text on one line with a NUL byte for each break (shown as "^@"), 0.10+ only its
--- first line (the rest of a `textEdit` is applied only by `vim.lsp.completion`, not by the
--- omnifunc). At CompleteDone (`completed`: v:completed_item), with the cursor right after
--- what was inserted: replace it with the item's whole text as lines, the cursor at its end.
--- Returns whether it did; nothing happens where the text before the cursor is not what
--- Neovim inserted, or the completion was not accepted.
function M.split_completed_lines(bufnr, completed, reason)
  if type(completed) ~= "table" or type(completed.word) ~= "string" or (reason and reason ~= "accept") then
    return false
  end
  local text = multiline_text(completed)
  if not text then
    return false
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  local inserted = completed.word:gsub("\n", "\0")
  if col < #inserted or line:sub(col - #inserted + 1, col) ~= inserted then
    return false
  end
  local parts = vim.split(line:sub(1, col - #inserted) .. text, "\n", { plain = true })
  local last = parts[#parts]
  parts[#parts] = last .. line:sub(col + 1)
  vim.api.nvim_buf_set_lines(bufnr, row - 1, row, false, parts)
  vim.api.nvim_win_set_cursor(0, { row + #parts - 1, #last })
  return true
end

--- The plugin's ghost text in `bufnr` (fastcoder.ghost) and its insert-mode keys: each
--- acts when a suggestion is shown at the cursor, else the key does what it did before.
local function attach_ghost(client, bufnr, km)
  local ghost = require("fastcoder.ghost")
  ghost.attach(client, bufnr)
  local function key(lhs, action, desc)
    map(bufnr, lhs, function()
      if ghost.visible(bufnr) then
        return string.format("<Cmd>lua require('fastcoder.ghost').%s(%d)<CR>", action, bufnr)
      end
      return lhs
    end, desc, { expr = true })
  end
  key(km.accept, "accept", "FastCoder: accept the suggestion")
  key(km.accept_word, "accept_word", "FastCoder: accept the suggestion's next word")
  key(km.accept_line, "accept_line", "FastCoder: accept the suggestion's line")
  key(km.dismiss, "dismiss", "FastCoder: hide the suggestion")
end

--- Neovim 0.12's inline completion accepts its current item at the range the server gave for
--- the text as it was when asked. Our server's range starts at the cursor of the request, so
--- what was typed since (before the next answer: 0.2 s of debounce, then the model) would end
--- up after the suggestion ("w" typed, "w * h" accepted: "w * hw"). `on_accept` for
--- `vim.lsp.inline_completion.get`: the item applied over what was typed since when that is
--- the suggestion's own start (the range's end moved along by as much), nothing applied when
--- it is not (a suggestion for another place); any other item as Neovim would.
function M.accept_caught_up(bufnr, item)
  if type(item) ~= "table" or type(item.insert_text) ~= "string" or item.range == nil then
    return item
  end
  local ok, srow, scol, erow, ecol = pcall(function()
    return item.range:to_extmark()
  end)
  local win = vim.fn.bufwinid(bufnr)
  if not ok or win == -1 then
    return item
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(win))
  row = row - 1
  if row == srow and col == scol then
    return item -- nothing typed since it was asked for
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  local typed = line:sub(scol + 1, col)
  if row ~= srow or col < scol or item.insert_text:sub(1, #typed) ~= typed then
    return nil -- the cursor left the place it was asked for
  end
  local lines = vim.split(item.insert_text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, srow, scol, erow, ecol + (erow == srow and #typed or 0), lines)
  vim.api.nvim_win_set_cursor(win, { srow + #lines, (#lines == 1 and scol or 0) + #lines[#lines] })
  if item.command then
    local client = vim.lsp.get_client_by_id(item.client_id)
    if client then
      pcall(function()
        client:exec_cmd(item.command, { bufnr = bufnr })
      end)
    end
  end
  return nil
end

local function on_attach(client, bufnr)
  local cfg = M.config
  local km = cfg.keymaps or {}
  if cfg.omnifunc then
    vim.bo[bufnr].omnifunc = "v:lua.vim.lsp.omnifunc"
    vim.api.nvim_create_autocmd("CompleteDone", {
      group = vim.api.nvim_create_augroup("FastCoderComplete" .. bufnr, { clear = true }),
      buffer = bufnr,
      desc = "FastCoder: a multi-line completion as lines",
      callback = function()
        local event = vim.v.event or {}
        M.split_completed_lines(bufnr, vim.v.completed_item, event.reason)
      end,
    })
  end
  local native = cfg.inline_completion and M.has_inline_completion()
  if not native and cfg.ghost_text then
    attach_ghost(client, bufnr, km)
    if M.has_inline_completion() then
      -- a config that turns Neovim's own on for every client would draw a second suggestion
      -- and send a second request per key: off for this client only (others keep it)
      pcall(vim.lsp.inline_completion.enable, false, { client_id = client.id })
    end
  end
  if native then
    local ic = vim.lsp.inline_completion
    pcall(ic.enable, true, { bufnr = bufnr })
    if km.accept then
      local fallback = km.accept
      map(bufnr, km.accept, function()
        local accepted = ic.get({
          bufnr = bufnr,
          on_accept = function(item)
            return M.accept_caught_up(bufnr, item)
          end,
        })
        if accepted then
          return ""
        end
        return fallback
      end, "FastCoder: accept inline completion", { expr = true })
    end
    map(bufnr, km.next, function()
      ic.select({ bufnr = bufnr, count = 1 })
    end, "FastCoder: next inline completion")
    map(bufnr, km.prev, function()
      ic.select({ bufnr = bufnr, count = -1 })
    end, "FastCoder: previous inline completion")
  end
  if (tonumber(cfg.cursor_rest_ms) or 0) > 0 then
    watch_cursor(client, bufnr, cfg.cursor_rest_ms)
  end
  -- Manual trigger: LSP completion through omnifunc (works on every version).
  map(bufnr, km.trigger, "<C-x><C-o>", "FastCoder: complete")
  if type(cfg.on_attach) == "function" then
    cfg.on_attach(client, bufnr)
  end
end

local function lsp_config(root)
  local cfg = M.config
  local handlers = { ["fastcoder/status"] = M.on_status }
  return {
    name = cfg.name,
    cmd = cfg.cmd,
    root_dir = root,
    init_options = cfg.init_options or {},
    settings = settings_table(),
    handlers = handlers,
    capabilities = cfg.capabilities,
    on_attach = on_attach,
    on_init = function(client)
      -- 0.8+ sends config.settings after initialize by itself; 0.7 does not.
      if not vim.lsp.start and next(client.config.settings or {}) then
        client_notify(client, "workspace/didChangeConfiguration", { settings = client.config.settings })
      end
      if type(cfg.on_init) == "function" then
        cfg.on_init(client)
      end
    end,
    on_exit = function(code, signal, client_id)
      if code ~= 0 and M.status.state ~= "error" then
        vim.schedule(function()
          set_status("error", string.format("server exited (code %s, signal %s)", code, signal), client_id)
        end)
      elseif M.status.state ~= "error" then
        vim.schedule(function()
          set_status("stopped", "server stopped", client_id)
        end)
      end
    end,
  }
end

--- Start (or reuse) the server for `bufnr` and attach it. Returns the client id or nil.
function M.attach(bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= "" then
    return nil
  end
  local problem = M.check_cmd(M.config.cmd)
  if problem then
    set_status("error", problem)
    notify(problem, levels.ERROR, "cmd:" .. tostring(M.config.cmd and M.config.cmd[1]))
    return nil
  end
  local root = M.find_root(bufnr)
  local config = lsp_config(root)
  if M.status.state == "stopped" or M.status.state == "error" then
    set_status("starting", "starting " .. table.concat(M.config.cmd, " "))
  end

  if vim.lsp.start then
    -- 0.8+: vim.lsp.start reuses a running client with the same name and root_dir.
    local ok, id = pcall(vim.api.nvim_buf_call, bufnr, function()
      return vim.lsp.start(config, { bufnr = bufnr })
    end)
    if not ok or not id then
      local msg = "could not start the server: " .. tostring(id)
      set_status("error", msg)
      notify(msg, levels.ERROR, "start:" .. root)
      return nil
    end
    return id
  end

  -- 0.7: start_client once per root, then buf_attach_client.
  local id = clients_by_root[root]
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or is_stopped(client) then
    local ok, new_id = pcall(vim.lsp.start_client, config)
    if not ok or not new_id then
      local msg = "could not start the server: " .. tostring(new_id)
      set_status("error", msg)
      notify(msg, levels.ERROR, "start:" .. root)
      return nil
    end
    id = new_id
    clients_by_root[root] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

local function filetype_enabled(ft)
  for _, f in ipairs(M.config.filetypes or {}) do
    if f == ft or f == "*" then
      return true
    end
  end
  return false
end

-------------------------------------------------------------------------------
-- server commands
-------------------------------------------------------------------------------

local function pick_client(bufnr)
  local attached = get_clients({ bufnr = bufnr or vim.api.nvim_get_current_buf() })
  if #attached > 0 then
    return attached[1]
  end
  return get_clients()[1]
end

--- workspace/executeCommand on the FastCoder client; callback(err, result).
function M.execute(command, arguments, callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = pick_client(bufnr)
  if not client then
    notify("the server is not running (see :FastCoderStatus)", levels.WARN)
    return false
  end
  client_request(client, "workspace/executeCommand", { command = command, arguments = arguments or {} }, function(err, result)
    if callback then
      callback(err, result)
    elseif err then
      notify(command .. " failed: " .. (err.message or vim.inspect(err)), levels.ERROR)
    end
  end, bufnr)
  return true
end

--- Edit lines line1..line2 (1-based, inclusive) of bufnr following `instruction`.
--- The server applies the edit itself (workspace/applyEdit).
function M.edit_range(instruction, line1, line2, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local last = vim.api.nvim_buf_get_lines(bufnr, line2 - 1, line2, false)[1] or ""
  local args = {
    uri = vim.uri_from_bufnr(bufnr),
    range = {
      start = { line = line1 - 1, character = 0 },
      ["end"] = { line = line2 - 1, character = utf16_len(last) },
    },
    instruction = instruction,
  }
  return M.execute("fastcoder.editSelection", { args }, function(err, result)
    if err then
      notify("edit failed: " .. (err.message or vim.inspect(err)), levels.ERROR)
    elseif type(result) ~= "table" or result.edit == nil or result.edit == vim.NIL then
      notify("the model proposed no change")
    end
  end, bufnr)
end

function M.show_stats()
  return M.execute("fastcoder.stats", {}, function(err, result)
    if err then
      notify("stats failed: " .. (err.message or vim.inspect(err)), levels.ERROR)
    else
      notify("stats:\n" .. vim.inspect(result))
    end
  end)
end

function M.rebuild_index()
  return M.execute("fastcoder.rebuildIndex", {}, function(err)
    if err then
      notify("rebuilding the index failed: " .. (err.message or vim.inspect(err)), levels.ERROR)
    end
  end)
end

--- Merge `values` into the settings and push them to running servers.
function M.update_settings(values)
  M.config.init_options = vim.tbl_extend("force", M.config.init_options or {}, values)
  if M.config.settings ~= nil then
    M.config.settings = vim.tbl_extend("force", M.config.settings, values)
  end
  local settings = settings_table()
  for _, client in ipairs(get_clients()) do
    client.config.settings = settings
    client_notify(client, "workspace/didChangeConfiguration", { settings = settings })
  end
end

function M.status_text()
  local lines = { string.format("FastCoder: %s%s", M.status.state, M.status.message ~= "" and (" - " .. M.status.message) or "") }
  local clients = get_clients()
  if #clients == 0 then
    table.insert(lines, "no server running")
  end
  for _, client in ipairs(clients) do
    local nbufs = 0
    for _ in pairs(client.attached_buffers or {}) do
      nbufs = nbufs + 1
    end
    table.insert(lines, string.format("client %d (root %s), %d buffer(s)", client.id, tostring(client.config.root_dir), nbufs))
  end
  return table.concat(lines, "\n")
end

function M.restart()
  for _, client in ipairs(get_clients()) do
    client_stop(client, true)
  end
  clients_by_root = {}
  warned = {}
  set_status("stopped", "restarting")
  vim.defer_fn(function()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(buf) and filetype_enabled(vim.bo[buf].filetype) then
        M.attach(buf)
      end
    end
  end, 500)
end

local function create_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd("FastCoderStatus", function()
    vim.notify(M.status_text(), levels.INFO)
  end, { desc = "Show the last FastCoder server status" })
  cmd("FastCoderStats", function()
    M.show_stats()
  end, { desc = "Show FastCoder stats" })
  cmd("FastCoderRebuildIndex", function()
    M.rebuild_index()
  end, { desc = "Rebuild the FastCoder repository index" })
  cmd("FastCoderEnable", function()
    M.update_settings({ enabled = true })
  end, { desc = "Enable FastCoder completions" })
  cmd("FastCoderDisable", function()
    M.update_settings({ enabled = false })
  end, { desc = "Disable FastCoder completions" })
  cmd("FastCoderRestart", function()
    M.restart()
  end, { desc = "Restart the FastCoder server" })
  cmd("FastCoderEdit", function(opts)
    local line1, line2, buf = opts.line1, opts.line2, vim.api.nvim_get_current_buf()
    if opts.args ~= "" then
      M.edit_range(opts.args, line1, line2, buf)
      return
    end
    vim.ui.input({ prompt = "FastCoder instruction: " }, function(input)
      if input and input:match("%S") then
        M.edit_range(input, line1, line2, buf)
      end
    end)
  end, { range = true, nargs = "*", desc = "Edit the selected lines with an instruction" })
end

-------------------------------------------------------------------------------
-- setup
-------------------------------------------------------------------------------

local DICT_KEYS = { init_options = true, settings = true, keymaps = true }

--- Merge user options over the defaults. Lists (cmd, filetypes, root_markers) are replaced,
--- tables in DICT_KEYS are merged key by key.
function M.merge_config(opts)
  local cfg = vim.deepcopy(M.defaults)
  for k, v in pairs(opts or {}) do
    if DICT_KEYS[k] and type(v) == "table" and type(cfg[k]) == "table" then
      cfg[k] = vim.tbl_extend("force", cfg[k], v)
    else
      cfg[k] = v
    end
  end
  return cfg
end

function M.setup(opts)
  local cfg = M.merge_config(opts)
  local expected = {
    cmd = "table", init_options = "table", settings = "table?", filetypes = "table",
    root_markers = "table", name = "string", keymaps = "table",
    on_attach = "function?", on_init = "function?", on_status = "function?",
  }
  for key, want in pairs(expected) do
    local optional = want:sub(-1) == "?"
    local typ = optional and want:sub(1, -2) or want
    local value = cfg[key]
    if not (type(value) == typ or (optional and value == nil)) then
      error(string.format("fastcoder.setup: option '%s' must be a %s, got %s", key, want, type(value)), 2)
    end
  end
  M.config = cfg
  warned = {}

  local group = vim.api.nvim_create_augroup("FastCoder", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = cfg.filetypes,
    callback = function(args)
      M.attach(args.buf)
    end,
    desc = "Start/attach the FastCoder language server",
  })
  if not did_setup then
    create_commands()
    did_setup = true
  end
  -- Buffers that were already open (lazy-loaded plugin).
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and filetype_enabled(vim.bo[buf].filetype) then
      M.attach(buf)
    end
  end
  return M
end

return M
