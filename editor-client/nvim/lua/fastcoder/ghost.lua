-- Ghost text: the server's inline suggestion shown in the buffer as you type, for Neovim
-- without native LSP inline completion (before 0.12).
--
-- On every change in insert mode (and on entering it) the plugin asks the server for
-- `textDocument/inlineCompletion` at the cursor (the server debounces, answers typed-through
-- text from its cache and supersedes older requests of the document), cancels the request
-- before it, and draws the answer as virtual text: its first line at the cursor, the others
-- as virtual lines below. Typing what the suggestion says moves it along at once (the server's
-- next answer replaces it). Keys (insert mode): accept all, the next word, the next line;
-- dismiss. Nothing here blocks: answers that arrive for an older buffer state are dropped.

local M = {}

local api = vim.api
M.ns = api.nvim_create_namespace("fastcoder_ghost")
M.hl = "FastCoderGhost"

-- bufnr -> { client, request = id, tick, row, col, shown = { row, col, text, stop, mark } }
local state = {}

local function has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

local function utf16_col(line, col)
  if has("0.11") then
    return vim.str_utfindex(line:sub(1, col), "utf-16")
  end
  local _, utf16 = vim.str_utfindex(line:sub(1, col))
  return utf16
end

local function byte_col(line, utf16)
  local ok, col
  if has("0.11") then
    ok, col = pcall(vim.str_byteindex, line, "utf-16", utf16, false)
  else
    ok, col = pcall(vim.str_byteindex, line, utf16, true)
  end
  return ok and col or #line
end

local function cancel(s)
  if s.request and s.client then
    local client, id = s.client, s.request
    pcall(function()
      if has("0.11") then
        client:cancel_request(id)
      else
        client.cancel_request(id)
      end
    end)
  end
  s.request = nil
end

--- Remove the ghost text of `bufnr` (the suggestion is forgotten; a pending request stays).
function M.clear(bufnr)
  local s = state[bufnr]
  if s then
    s.shown = nil
  end
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  end
end

--- The suggestion shown in `bufnr`, or nil: { row (1-based), col (byte), text, stop }.
function M.current(bufnr)
  local s = state[bufnr or api.nvim_get_current_buf()]
  return s and s.shown or nil
end

local function cursor()
  local row, col = unpack(api.nvim_win_get_cursor(0))
  return row, col
end

local function in_insert()
  return api.nvim_get_mode().mode:sub(1, 1) == "i"
end

--- Draw `text` at (row, col) of `bufnr`; `stop` is the byte column the accepted text
--- replaces up to (the server's range end; col when it replaces nothing).
local function show(bufnr, row, col, text, stop)
  M.clear(bufnr)
  if text == "" then
    return
  end
  local lines = vim.split(text, "\n", { plain = true })
  local line = api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  local opts = { hl_mode = "combine" }
  local first = lines[1]
  local inline = col < #line and has("0.10")
  if inline and #lines == 1 and stop and stop > col then
    -- it replaces text right of the cursor (an auto-closed ")") and ends with it: inline, show
    -- only what comes before it, so the line reads as it will after <Tab> (not `print("a"))`)
    local covered = line:sub(col + 1, stop)
    if first:sub(-#covered) == covered then
      first = first:sub(1, #first - #covered)
    end
  end
  if first ~= "" then
    opts.virt_text = { { first, M.hl } }
    if col >= #line then
      opts.virt_text_pos = "overlay" -- at the line's end: as if typed
    elseif inline then
      opts.virt_text_pos = "inline" -- pushes the rest of the line right, as VS Code does
    else
      opts.virt_text_pos = "eol" -- 0.7-0.9 cannot insert virtual text inside a line
    end
  end
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      table.insert(opts.virt_lines, { { lines[i] == "" and " " or lines[i], M.hl } })
    end
  end
  local ok, mark = pcall(api.nvim_buf_set_extmark, bufnr, M.ns, row - 1, math.min(col, #line), opts)
  state[bufnr].shown = { row = row, col = col, text = text, stop = stop, mark = ok and mark or nil }
end

--- The text an inline completion item inserts (a string, or a snippet's StringValue).
local function insert_text(item)
  local text = item.insertText
  if type(text) == "table" then
    text = text.value
  end
  return type(text) == "string" and text or nil
end

local function on_answer(bufnr, id, tick, row, col, err, result)
  local s = state[bufnr]
  if not s or s.request ~= id then
    return -- a newer request was sent
  end
  s.request = nil
  if err or type(result) ~= "table" or not api.nvim_buf_is_valid(bufnr) then
    return
  end
  if api.nvim_buf_get_changedtick(bufnr) ~= tick or not in_insert() or api.nvim_get_current_buf() ~= bufnr then
    return -- typed on meanwhile: that change asked again
  end
  local r, c = cursor()
  if r ~= row or c ~= col then
    return
  end
  local items = result.items or result
  local item = type(items) == "table" and items[1] or nil
  local text = item and insert_text(item)
  if not text then
    M.clear(bufnr)
    return
  end
  local line = api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  local start, stop = col, col
  local range = item.range
  if type(range) == "table" and range.start and range["end"] then
    if range.start.line ~= row - 1 or range["end"].line ~= row - 1 then
      M.clear(bufnr)
      return -- replaces other lines: not shown as ghost text
    end
    start, stop = byte_col(line, range.start.character), byte_col(line, range["end"].character)
  end
  -- what the item replaces before the cursor is typed already: the ghost shows the rest
  local typed = line:sub(start + 1, col)
  if start > col or stop < col or text:sub(1, #typed) ~= typed then
    M.clear(bufnr)
    return
  end
  show(bufnr, row, col, text:sub(#typed + 1), stop)
end

--- Ask the server for a suggestion at the cursor of `bufnr` (cancelling the one asked
--- before), unless the one shown is for this very place and text.
function M.request(bufnr)
  local s = state[bufnr]
  if not s or not in_insert() or vim.fn.pumvisible() == 1 then
    if s then
      cancel(s)
    end
    M.clear(bufnr)
    return
  end
  local tick = api.nvim_buf_get_changedtick(bufnr)
  local row, col = cursor()
  if s.tick == tick and s.row == row and s.col == col then
    return -- asked (or shown) here already
  end
  local shown = s.shown
  s.tick, s.row, s.col = tick, row, col
  cancel(s)
  -- typed along the suggestion: what is left of it stays while the server is asked
  local line = api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  if shown and shown.row == row and col > shown.col and shown.text:sub(1, col - shown.col) == line:sub(shown.col + 1, col)
    and not shown.text:sub(1, col - shown.col):find("\n", 1, true) then
    show(bufnr, row, col, shown.text:sub(col - shown.col + 1), col + (shown.stop - shown.col)) -- what it replaces moved right
  else
    M.clear(bufnr)
  end
  local client = s.client
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = row - 1, character = utf16_col(line, col) },
    context = { triggerKind = 2 }, -- automatic: as you type
  }
  local ok, id
  local handler = function(err, result)
    on_answer(bufnr, id, tick, row, col, err, result)
  end
  if has("0.11") then
    ok, id = client:request("textDocument/inlineCompletion", params, handler, bufnr)
  else
    ok, id = client.request("textDocument/inlineCompletion", params, handler, bufnr)
  end
  s.request = ok and id or nil
end

--- The part of `text` that `how` accepts: "all", "word" (through the next word, or the
--- next run of symbols) or "line" (the rest of the line; the next line when it starts
--- with a line break).
function M.piece(text, how)
  if how == "word" then
    return text:match("^%s*[%w_]+") or text:match("^%s*[^%w_%s]+") or text:match("^%s+") or text
  elseif how == "line" then
    if text:sub(1, 1) == "\n" then
      return "\n" .. text:sub(2):match("^[^\n]*")
    end
    return text:match("^[^\n]*")
  end
  return text
end

--- Insert the shown suggestion (or the part `how` says) at the cursor. True when it did.
function M.accept(bufnr, how)
  bufnr = bufnr or api.nvim_get_current_buf()
  local shown = M.current(bufnr)
  local row, col = cursor()
  if not shown or shown.row ~= row or shown.col ~= col then
    return false
  end
  local piece = M.piece(shown.text, how or "all")
  local whole = piece == shown.text
  local lines = vim.split(piece, "\n", { plain = true })
  -- the whole suggestion replaces up to the item's range end (text right of the cursor it
  -- rewrites); a part of it replaces nothing
  local line = api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  local stop = math.min(whole and shown.stop or col, #line) -- (the line may have changed right of the cursor)
  local rest = shown.text:sub(#piece + 1)
  M.clear(bufnr)
  api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, stop, lines)
  local end_row = row + #lines - 1
  local end_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { end_row, end_col })
  if not whole then -- the rest stays shown at once (the server's answer replaces it)
    local s = state[bufnr]
    show(bufnr, end_row, end_col, rest, end_col + math.max(shown.stop - col, 0))
    s.tick, s.row, s.col = api.nvim_buf_get_changedtick(bufnr), end_row, end_col
  end
  return true
end

function M.accept_word(bufnr)
  return M.accept(bufnr, "word")
end

function M.accept_line(bufnr)
  return M.accept(bufnr, "line")
end

--- Whether a suggestion is shown at the cursor of `bufnr` (what the keys would accept).
function M.visible(bufnr)
  local shown = M.current(bufnr)
  if not shown then
    return false
  end
  local row, col = cursor()
  return shown.row == row and shown.col == col
end

--- Hide the suggestion. True when one was shown.
function M.dismiss(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  local s = state[bufnr]
  local had = s ~= nil and s.shown ~= nil
  if s then
    cancel(s)
  end
  M.clear(bufnr)
  return had
end

--- Start ghost text in `bufnr` for `client`.
function M.attach(client, bufnr)
  vim.cmd("highlight default link " .. M.hl .. " Comment") -- a colorscheme or the user may set it
  state[bufnr] = { client = client }
  local group = api.nvim_create_augroup("FastCoderGhost" .. bufnr, { clear = true })
  api.nvim_create_autocmd("ColorScheme", {
    group = group,
    desc = "FastCoder: the ghost text's highlight after :colorscheme cleared it",
    callback = function()
      vim.cmd("highlight default link " .. M.hl .. " Comment")
    end,
  })
  api.nvim_create_autocmd({ "InsertEnter", "TextChangedI", "CursorMovedI" }, {
    group = group,
    buffer = bufnr,
    desc = "FastCoder: ask for a suggestion at the cursor",
    callback = function()
      -- after the event: the cursor and the text are where the typed key left them
      vim.schedule(function()
        if state[bufnr] and api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
          M.request(bufnr)
        end
      end)
    end,
  })
  api.nvim_create_autocmd({ "InsertLeave", "BufLeave", "TextChangedP" }, {
    group = group,
    buffer = bufnr,
    desc = "FastCoder: hide the suggestion",
    callback = function()
      local s = state[bufnr]
      if s then
        cancel(s)
        s.tick, s.row, s.col = nil, nil, nil
      end
      M.clear(bufnr)
    end,
  })
  api.nvim_create_autocmd("BufUnload", {
    group = group,
    buffer = bufnr,
    once = true,
    callback = function()
      M.detach(bufnr)
    end,
  })
end

function M.detach(bufnr)
  local s = state[bufnr]
  if s then
    cancel(s)
  end
  state[bufnr] = nil
  pcall(api.nvim_del_augroup_by_name, "FastCoderGhost" .. bufnr)
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  end
end

function M.attached(bufnr)
  return state[bufnr] ~= nil
end

return M
