--- The built-in floating picker: a prompt over a list on the left, a preview
--- of the item under the cursor on the right. It needs no other plugin.
---
--- Input: spec = {prompt_title, query, on_query(text), keys = {[lhs] = fn(picker)},
--- on_close()}. The caller pushes what to show with picker:set(items, title)
--- (items as made by hits.item(); title a list of {text, hl} chunks).
--- Output: windows and buffers, and picker:open_selected(how) / picker:quickfix().
local config = require("autodoc.config")
local hits = require("autodoc.hits")

local api = vim.api

local M = {}

local NS_LIST = api.nvim_create_namespace("autodoc.list")
local NS_PREVIEW = api.nvim_create_namespace("autodoc.preview")
local NS_SPAN = api.nvim_create_namespace("autodoc.preview_span")
M.NS_LIST, M.NS_PREVIEW, M.NS_SPAN = NS_LIST, NS_PREVIEW, NS_SPAN

M.active = nil ---@type table? the open picker

local function scratch(name, keep)
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = keep and "hide" or "wipe"
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].swapfile = false
  vim.b[buf].autodoc_role = name
  return buf
end

local function layout(opts)
  local cols, lines = vim.o.columns, vim.o.lines - vim.o.cmdheight
  local W = math.max(40, math.floor(cols * opts.width))
  local H = math.max(10, math.floor(lines * opts.height))
  W = math.min(W, cols)
  H = math.min(H, lines)
  local row0 = math.floor((lines - H) / 2)
  local col0 = math.floor((cols - W) / 2)
  local left = W
  if opts.preview then
    left = math.max(20, math.floor(W * (1 - opts.preview)))
  end
  local l = {
    prompt = { row = row0, col = col0, width = left - 2, height = 1 },
    list = { row = row0 + 3, col = col0, width = left - 2, height = math.max(1, H - 5) },
  }
  if opts.preview and W - left - 2 >= 10 then
    l.preview = { row = row0, col = col0 + left, width = W - left - 2, height = math.max(1, H - 2) }
  end
  return l
end

local function float(buf, geo, title, border, focus)
  local cfg = {
    relative = "editor",
    row = geo.row,
    col = geo.col,
    width = geo.width,
    height = geo.height,
    style = "minimal",
    border = border,
    zindex = 60,
  }
  if title then
    cfg.title = title
    cfg.title_pos = "left"
  end
  return api.nvim_open_win(buf, focus, cfg)
end

local Picker = {}
Picker.__index = Picker

--- Open the picker (closing one already open).
function M.open(spec)
  if M.active then
    M.active:close()
  end
  require("autodoc.highlight").define()
  local opts = config.get()
  local self = setmetatable({ spec = spec, opts = opts, items = {}, selected = 0, preview_bufs = {} }, Picker)
  self.prev_win = api.nvim_get_current_win()
  self.prev_mode = api.nvim_get_mode().mode
  local geo = layout(opts.layout)
  local border = opts.layout.border

  self.list_buf = scratch("list")
  self.prompt_buf = scratch("prompt")
  self.list_win = float(self.list_buf, geo.list, { { " ", "AutodocTitle" } }, border, false)
  vim.wo[self.list_win].cursorline = true
  vim.wo[self.list_win].wrap = false
  vim.wo[self.list_win].winhighlight = "CursorLine:AutodocSelection,FloatBorder:AutodocBorder"
  if geo.preview then
    self.preview_geo = geo.preview
    self.preview_blank = scratch("preview", true)
    self.preview_win = float(self.preview_blank, geo.preview, { { " preview ", "AutodocTitle" } }, border, false)
    vim.wo[self.preview_win].number = true
    vim.wo[self.preview_win].wrap = false
    vim.wo[self.preview_win].cursorline = true
    vim.wo[self.preview_win].winhighlight = "CursorLine:AutodocSpan,FloatBorder:AutodocBorder"
  end
  local ptitle = spec.prompt_title or " autodoc "
  if type(ptitle) == "string" then
    ptitle = { { ptitle, "AutodocTitle" } }
  end
  self.prompt_win = float(self.prompt_buf, geo.prompt, ptitle, border, true)
  vim.wo[self.prompt_win].winhighlight = "FloatBorder:AutodocBorder"

  api.nvim_buf_set_lines(self.prompt_buf, 0, -1, false, { spec.query or "" })
  self.text = spec.query or ""
  self:_keys()
  self._attached = true
  api.nvim_buf_attach(self.prompt_buf, false, {
    on_lines = function()
      if not self._attached then
        return true
      end
      vim.schedule(function()
        self:_on_prompt()
      end)
    end,
  })
  self.augroup = api.nvim_create_augroup("autodoc.picker", { clear = true })
  api.nvim_create_autocmd("BufLeave", {
    group = self.augroup,
    buffer = self.prompt_buf,
    callback = function()
      vim.schedule(function()
        if not self._acting then
          self:close()
        end
      end)
    end,
  })
  api.nvim_create_autocmd("VimResized", {
    group = self.augroup,
    callback = function()
      self:_relayout()
    end,
  })
  vim.cmd("startinsert!")
  M.active = self
  if spec.on_query and self.text ~= "" then
    spec.on_query(self.text)
  end
  return self
end

function Picker:_relayout()
  if self.closed then
    return
  end
  local geo = layout(self.opts.layout)
  for _, pair in ipairs({ { self.prompt_win, geo.prompt }, { self.list_win, geo.list }, { self.preview_win, geo.preview } }) do
    local win, g = pair[1], pair[2]
    if win and g and api.nvim_win_is_valid(win) then
      api.nvim_win_set_config(win, { relative = "editor", row = g.row, col = g.col, width = g.width, height = g.height })
    end
  end
end

function Picker:_on_prompt()
  if self.closed or not api.nvim_buf_is_valid(self.prompt_buf) then
    return
  end
  local lines = api.nvim_buf_get_lines(self.prompt_buf, 0, -1, false)
  local text = table.concat(lines, " ")
  if #lines > 1 then -- a paste with newlines: keep one line
    self._attached = true
    api.nvim_buf_set_lines(self.prompt_buf, 0, -1, false, { text })
    pcall(api.nvim_win_set_cursor, self.prompt_win, { 1, #text })
  end
  if text == self.text then
    return
  end
  self.text = text
  if self.spec.on_query then
    self.spec.on_query(text)
  end
end

local function each_key(lhs, fn)
  if lhs == false or lhs == nil then
    return
  end
  if type(lhs) == "string" then
    lhs = { lhs }
  end
  for _, k in ipairs(lhs) do
    fn(k)
  end
end

function Picker:_map(lhs, fn, desc)
  each_key(lhs, function(k)
    vim.keymap.set({ "i", "n" }, k, function()
      fn(self)
    end, { buffer = self.prompt_buf, nowait = true, silent = true, desc = desc })
  end)
end

function Picker:_keys()
  local k = self.opts.keys
  self:_map(k.open, function(p)
    p:open_selected("edit")
  end, "autodoc: open")
  self:_map(k.split, function(p)
    p:open_selected("split")
  end, "autodoc: open in a split")
  self:_map(k.vsplit, function(p)
    p:open_selected("vsplit")
  end, "autodoc: open in a vertical split")
  self:_map(k.tab, function(p)
    p:open_selected("tab")
  end, "autodoc: open in a tab")
  self:_map(k.quickfix, function(p)
    p:quickfix()
  end, "autodoc: hits to the quickfix list")
  self:_map(k.next, function(p)
    p:move(1)
  end, "autodoc: next")
  self:_map(k.prev, function(p)
    p:move(-1)
  end, "autodoc: previous")
  each_key(k.close, function(key)
    -- <Esc> in insert mode closes too: the prompt has nothing to do in normal mode
    vim.keymap.set({ "i", "n" }, key, function()
      self:close()
    end, { buffer = self.prompt_buf, nowait = true, silent = true, desc = "autodoc: close" })
  end)
  vim.keymap.set("n", "q", function()
    self:close()
  end, { buffer = self.prompt_buf, nowait = true, silent = true })
  for lhs, fn in pairs(self.spec.keys or {}) do
    self:_map(lhs, fn)
  end
end

local HAS_FOOTER = vim.fn.has("nvim-0.10") == 1

--- These {text, hl} chunks cut to `width` display cells, the last one kept ending in "…"
--- (a border shows what fits and drops the rest mid-word).
local function fit(chunks, width)
  local out, used = {}, 0
  for _, c in ipairs(chunks) do
    local w = vim.fn.strdisplaywidth(c[1])
    if used + w <= width then
      table.insert(out, c)
      used = used + w
    else
      local room = width - used - 1
      if room > 0 then
        local cut = vim.fn.strcharpart(c[1], 0, room)
        while vim.fn.strdisplaywidth(cut) > room do
          cut = vim.fn.strcharpart(cut, 0, vim.fn.strchars(cut) - 1)
        end
        table.insert(out, { cut .. "…", c[2] })
      elseif #out > 0 then
        local last = out[#out]
        out[#out] = { vim.fn.strcharpart(last[1], 0, vim.fn.strchars(last[1]) - 1) .. "…", last[2] }
      end
      break
    end
  end
  return out
end
M.fit = fit

--- Show these items under this title, with this status line (the border's
--- footer; on Neovim 0.9, after the title). Both are lists of {text, hl} chunks.
function Picker:set(items, title, status)
  if self.closed then
    return
  end
  self.items = items or {}
  self.title = title
  local lines = {}
  for _, it in ipairs(self.items) do
    table.insert(lines, it.text)
  end
  vim.bo[self.list_buf].modifiable = true
  api.nvim_buf_set_lines(self.list_buf, 0, -1, false, lines)
  vim.bo[self.list_buf].modifiable = false
  api.nvim_buf_clear_namespace(self.list_buf, NS_LIST, 0, -1)
  for i, it in ipairs(self.items) do
    for _, h in ipairs(it.highlights or {}) do
      if h[2] > h[1] then
        api.nvim_buf_set_extmark(self.list_buf, NS_LIST, i - 1, h[1], { end_col = math.min(h[2], #it.text), hl_group = h[3], priority = h[3] == "AutodocMatch" and 210 or 200 })
      end
    end
  end
  if #self.items == 0 and self.empty_text and self.empty_text ~= "" then
    -- wrapped to the window: an error message is read whole
    local width = api.nvim_win_is_valid(self.list_win) and api.nvim_win_get_width(self.list_win) or 60
    local rows = {}
    for _, para in ipairs(vim.split(self.empty_text, "\n")) do
      local line = ""
      for word in para:gmatch("%S+") do
        if line ~= "" and vim.fn.strdisplaywidth(line .. " " .. word) > width then
          table.insert(rows, line)
          line = word
        else
          line = line == "" and word or (line .. " " .. word)
        end
      end
      table.insert(rows, line)
    end
    local hl = self.empty_hl or "Comment"
    local virt_lines = {}
    for i = 2, #rows do
      table.insert(virt_lines, { { rows[i], hl } })
    end
    api.nvim_buf_set_extmark(self.list_buf, NS_LIST, 0, 0, {
      virt_text = { { rows[1], hl } },
      virt_text_pos = "overlay",
      virt_lines = #virt_lines > 0 and virt_lines or nil,
    })
  end
  self.status = status
  if title and api.nvim_win_is_valid(self.list_win) then
    local cfg = { title = title, title_pos = "left" }
    if status and #status > 0 then
      if HAS_FOOTER then
        cfg.footer, cfg.footer_pos = fit(status, api.nvim_win_get_width(self.list_win)), "left"
      else
        cfg.title = vim.list_extend(vim.deepcopy(title), status)
      end
    elseif HAS_FOOTER then
      cfg.footer = ""
    end
    api.nvim_win_set_config(self.list_win, cfg)
  end
  self.selected = #self.items > 0 and 1 or 0
  self:_select()
end

--- What the list shows when there are no items (wrapped), and its highlight.
function Picker:set_empty_text(text, hl)
  self.empty_text = text
  self.empty_hl = hl
end

function Picker:move(delta)
  if #self.items == 0 then
    return
  end
  self.selected = ((self.selected - 1 + delta) % #self.items) + 1
  self:_select()
end

function Picker:_select()
  if self.closed then
    return
  end
  if self.selected > 0 and api.nvim_win_is_valid(self.list_win) then
    api.nvim_win_set_cursor(self.list_win, { self.selected, 0 })
  end
  self:_preview(self.items[self.selected])
end

function Picker:selected_item()
  return self.items[self.selected]
end

function Picker:_preview_buf(item)
  local buf = self.preview_bufs[item.filename]
  if buf and api.nvim_buf_is_valid(buf) then
    return buf
  end
  buf = scratch("preview", true)
  local ok, lines = pcall(vim.fn.readfile, item.filename)
  if not ok then
    lines = { "(cannot read " .. item.filename .. ")" }
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  if not pcall(vim.treesitter.start, buf, "markdown") then
    vim.bo[buf].syntax = "markdown"
  end
  self.preview_bufs[item.filename] = buf
  return buf
end

function Picker:_preview(item)
  local win = self.preview_win
  if not win or not api.nvim_win_is_valid(win) then
    return
  end
  if not item then
    api.nvim_win_set_buf(win, self.preview_blank)
    api.nvim_win_set_config(win, { title = { { " preview ", "AutodocTitle" } }, title_pos = "left" })
    self.preview_item = nil
    return
  end
  local buf = self:_preview_buf(item)
  api.nvim_win_set_buf(win, buf)
  vim.wo[win].number = true
  vim.wo[win].wrap = false
  vim.wo[win].cursorline = true
  local count = api.nvim_buf_line_count(buf)
  local first = math.max(1, math.min(item.lnum, count))
  local last = math.max(first, math.min(item.end_lnum or first, count))
  api.nvim_buf_clear_namespace(buf, NS_SPAN, 0, -1)
  api.nvim_buf_clear_namespace(buf, NS_PREVIEW, 0, -1)
  for l = first, last do
    api.nvim_buf_set_extmark(buf, NS_SPAN, l - 1, 0, { line_hl_group = "AutodocSpan", priority = 100 })
    local text = api.nvim_buf_get_lines(buf, l - 1, l, false)[1] or ""
    for _, r in ipairs(hits.find_words(text, item.words or {})) do
      api.nvim_buf_set_extmark(buf, NS_PREVIEW, l - 1, r[1], { end_col = r[2], hl_group = "AutodocMatch", priority = 200 })
    end
  end
  api.nvim_win_set_cursor(win, { first, 0 })
  api.nvim_win_call(win, function()
    vim.fn.winrestview({ topline = math.max(1, first - 3) })
  end)
  local title = string.format(" %s:%d-%d ", item.path or item.filename, first, last)
  api.nvim_win_set_config(win, { title = { { title, "AutodocTitle" } }, title_pos = "left" })
  self.preview_item = item
end

--- Close the picker and go back to where the user was.
function Picker:close()
  if self.closed then
    return
  end
  self.closed = true
  self._attached = false
  if M.active == self then
    M.active = nil
  end
  pcall(api.nvim_del_augroup_by_id, self.augroup)
  for _, win in ipairs({ self.prompt_win, self.list_win, self.preview_win }) do
    if win and api.nvim_win_is_valid(win) then
      pcall(api.nvim_win_close, win, true)
    end
  end
  local bufs = vim.tbl_values(self.preview_bufs)
  table.insert(bufs, self.preview_blank)
  for _, buf in ipairs(bufs) do
    if api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
  if self.prev_win and api.nvim_win_is_valid(self.prev_win) then
    api.nvim_set_current_win(self.prev_win)
  end
  if not self.prev_mode:find("^i") then
    vim.cmd("stopinsert")
  end
  if self.spec.on_close then
    self.spec.on_close()
  end
end

--- Open the selected item (how: edit | split | vsplit | tab) and close.
function Picker:open_selected(how)
  local item = self:selected_item()
  if not item then
    return
  end
  self._acting = true
  self:close()
  hits.open(item, how)
end

--- Send every item to the quickfix list and close.
function Picker:quickfix()
  if #self.items == 0 then
    return
  end
  local items = self.items
  self._acting = true
  self:close()
  hits.to_quickfix(items, self.spec.quickfix_title or "autodoc")
end

return M
