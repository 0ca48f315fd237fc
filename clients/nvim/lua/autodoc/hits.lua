--- Hits: how a search.query hit is shown and opened.
---
--- Input: hits from the daemon (path relative to the workspace root,
--- line_start/line_end 1-based inclusive, snippet with matched words between
--- « and »). Output: display lines with highlight ranges, the words to mark
--- in a preview, quickfix items, and opening a hit in a window.
--- Everything but open()/to_quickfix() is pure.
local M = {}

local OPEN = "«"
local CLOSE = "»"

--- The snippet without its marks, the byte ranges ({start, end}, 0-based,
--- end exclusive) of the marked words in it, and those words.
function M.clean_snippet(snippet)
  snippet = (snippet or ""):gsub("[\r\n\t]", " ")
  local out, ranges, words = {}, {}, {}
  local len = 0
  local i = 1
  while i <= #snippet do
    local o = snippet:find(OPEN, i, true)
    if not o then
      table.insert(out, snippet:sub(i))
      break
    end
    local c = snippet:find(CLOSE, o + #OPEN, true)
    if not c then
      table.insert(out, snippet:sub(i))
      break
    end
    local before = snippet:sub(i, o - 1)
    local word = snippet:sub(o + #OPEN, c - 1)
    table.insert(out, before)
    len = len + #before
    table.insert(ranges, { len, len + #word })
    table.insert(out, word)
    len = len + #word
    if word ~= "" then
      table.insert(words, word)
    end
    i = c + #CLOSE
  end
  return table.concat(out), ranges, words
end

--- `path:line  breadcrumb  snippet` and its highlights ({start, end, group}).
function M.format(hit)
  local loc = string.format("%s:%d", hit.path, hit.line_start or 1)
  local crumb = (hit.breadcrumb or ""):gsub("[\r\n]", " ")
  local snippet, ranges = M.clean_snippet(hit.snippet)
  local text = loc .. "  " .. crumb .. "  " .. snippet
  local hl = {
    { 0, #hit.path, "AutodocPath" },
    { #hit.path, #loc, "AutodocLnum" },
    { #loc + 2, #loc + 2 + #crumb, "AutodocBreadcrumb" },
  }
  local base = #loc + 2 + #crumb + 2
  for _, r in ipairs(ranges) do
    table.insert(hl, { base + r[1], base + r[2], "AutodocMatch" })
  end
  return text, hl
end

--- The plain words of a query (facet tokens, negations and operators left
--- out), lower-cased; a trailing * is kept to mean "prefix".
function M.query_words(query)
  local words = {}
  for token in (query or ""):gmatch("%S+") do
    local neg = token:sub(1, 1) == "-"
    local facet = token:match("^%-?[%w_%.]+:.") ~= nil
    local upper = token:upper()
    if not neg and not facet and upper ~= "AND" and upper ~= "OR" and upper ~= "NOT" then
      token = token:gsub('^["(]+', ""):gsub('[")]+$', "")
      for w in token:gmatch("[^%s\"]+") do
        table.insert(words, w:lower())
      end
    end
  end
  return words
end

--- The words to mark in a preview of a hit: the snippet's marked words and the query's words.
function M.match_words(hit, query)
  local seen, out = {}, {}
  local function add(w)
    w = w:lower()
    if w ~= "" and w ~= "*" and not seen[w] then
      seen[w] = true
      table.insert(out, w)
    end
  end
  local _, _, marked = M.clean_snippet(hit.snippet)
  for _, w in ipairs(marked) do
    add(w)
  end
  for _, w in ipairs(M.query_words(query)) do
    add(w)
  end
  return out
end

local function is_word_byte(b)
  return b and ((b >= 48 and b <= 57) or (b >= 65 and b <= 90) or (b >= 97 and b <= 122) or b == 95)
end

--- Where the words occur in a line (case-insensitive; whole words for ASCII
--- words, a prefix for `word*`): a sorted list of {start, end}, 0-based, end exclusive.
function M.find_words(line, words)
  local lower = line:lower()
  local found = {}
  for _, w in ipairs(words) do
    local prefix = w:sub(-1) == "*"
    if prefix then
      w = w:sub(1, -2)
    end
    if w ~= "" then
      local ascii = not w:find("[\128-\255]")
      local from = 1
      while true do
        local s, e = lower:find(w, from, true)
        if not s then
          break
        end
        local ok = true
        if ascii then
          ok = not is_word_byte(lower:byte(s - 1)) and (prefix or not is_word_byte(lower:byte(e + 1)))
        end
        if ok then
          local stop = e
          if prefix then
            while is_word_byte(lower:byte(stop + 1)) do
              stop = stop + 1
            end
          end
          table.insert(found, { s - 1, stop })
        end
        from = e + 1
      end
    end
  end
  table.sort(found, function(a, b)
    return a[1] < b[1] or (a[1] == b[1] and a[2] > b[2])
  end)
  return found
end

--- The absolute file of a hit.
function M.abs(root, path)
  if path:sub(1, 1) == "/" then
    return path
  end
  return (root:gsub("/+$", "")) .. "/" .. path
end

--- A display item for a hit (what every picker shows and opens).
function M.item(hit, root, query)
  local text, hl = M.format(hit)
  return {
    text = text,
    highlights = hl,
    filename = M.abs(root, hit.path),
    path = hit.path,
    lnum = hit.line_start or 1,
    end_lnum = hit.line_end or hit.line_start or 1,
    words = M.match_words(hit, query),
    hit = hit,
  }
end

local OPEN_CMD = { edit = "edit", split = "split", vsplit = "vsplit", tab = "tabedit" }

--- Open an item's file at its line in the current window, a split, a vertical split or a tab.
function M.open(item, how)
  local cmd = OPEN_CMD[how or "edit"] or "edit"
  vim.cmd("normal! m'")
  vim.cmd(cmd .. " " .. vim.fn.fnameescape(item.filename))
  local last = vim.api.nvim_buf_line_count(0)
  local lnum = math.max(1, math.min(item.lnum, last))
  vim.api.nvim_win_set_cursor(0, { lnum, 0 })
  pcall(vim.cmd, "normal! zv")
end

--- Quickfix entries for items.
function M.qf_items(items)
  local out = {}
  for _, it in ipairs(items) do
    local text = it.qf_text
    if not text then
      local snippet = M.clean_snippet(it.hit and it.hit.snippet or "")
      text = (it.hit and it.hit.breadcrumb or "") .. (snippet ~= "" and ("  " .. snippet) or "")
    end
    table.insert(out, {
      filename = it.filename,
      lnum = it.lnum,
      end_lnum = it.end_lnum,
      col = 1,
      text = text,
    })
  end
  return out
end

--- Put items in the quickfix list (titled) and open it.
function M.to_quickfix(items, title)
  vim.fn.setqflist({}, " ", { title = title, items = M.qf_items(items) })
  vim.cmd("botright copen")
end

return M
