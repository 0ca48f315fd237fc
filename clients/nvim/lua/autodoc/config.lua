--- Options: defaults < vim.g.autodoc < setup({...}), checked once, with a
--- clear message for each bad value (which then keeps its default).
---
--- Input: tables from the user. Output: one merged, checked options table
--- (config.get()). Nothing here does I/O besides vim.notify.
local M = {}

local PICKERS = { "auto", "builtin", "telescope", "fzf-lua", "snacks" }
local BACKLINKS = { "quickfix", "picker" }
local STAGES = { "lexical", "semantic", "rerank" }

---@class autodoc.Options
M.defaults = {
  -- The daemon's Unix socket. nil: the socket of the daemon serving the store `cmd`
  -- names (its --store, else $AUTODOC_STORE, else the default store), as `<cmd> socket`
  -- finds it through the store's lease: the daemon the CLI uses in the same environment.
  socket = nil,
  -- The autodoc executable, with any global flags (e.g. {"autodoc", "--store", "~/kb.db"}).
  cmd = { "autodoc" },
  -- Start the store's daemon when none serves it (`<cmd> socket --start`; with `socket`
  -- set, `<cmd> serve --socket <socket>` when nothing answers there).
  autostart = true,
  start_timeout_ms = 15000,
  request_timeout_ms = 30000,
  -- The workspace to search. nil: the one holding the current file (or the
  -- working directory), else the only one, else ask.
  workspace = nil,
  picker = "auto",
  debounce_ms = 100,
  limit = 50,
  -- Which stages the first search of a session asks for; <M-l>/<M-s>/<M-r> flip them.
  stages = { lexical = true, semantic = true, rerank = true },
  -- More search.query options for every search (paths, tags, facets, retrieval, ranker, fusion).
  search_opts = {},
  -- After :w of a Markdown file in a workspace the daemon does not watch, ask it to index.
  refresh_on_save = true,
  backlinks = "quickfix",
  -- The built-in picker's size (fractions of the editor) and border.
  layout = { width = 0.9, height = 0.8, preview = 0.5, border = "rounded" },
  keys = {
    toggle_lexical = "<M-l>",
    toggle_semantic = "<M-s>",
    toggle_rerank = "<M-r>",
    open = "<CR>",
    split = "<C-x>",
    vsplit = "<C-v>",
    tab = "<C-t>",
    quickfix = "<C-q>",
    next = { "<C-n>", "<Down>" },
    prev = { "<C-p>", "<Up>" },
    close = { "<Esc>", "<C-c>" },
  },
}

local function is_list(t)
  if type(t) ~= "table" then
    return false
  end
  local n = 0
  for _ in pairs(t) do
    n = n + 1
  end
  for i = 1, n do
    if t[i] == nil then
      return false
    end
  end
  return true
end

local function one_of(values)
  return function(v)
    if vim.tbl_contains(values, v) then
      return true
    end
    return false, "one of " .. table.concat(values, ", ")
  end
end

local function positive_int(v)
  if type(v) == "number" and v >= 1 and math.floor(v) == v then
    return true
  end
  return false, "a whole number ≥ 1"
end

local function non_negative_int(v)
  if type(v) == "number" and v >= 0 and math.floor(v) == v then
    return true
  end
  return false, "a whole number ≥ 0"
end

local function boolean(v)
  return type(v) == "boolean", "true or false"
end

local function optional_string(v)
  return v == nil or (type(v) == "string" and v ~= ""), "a non-empty string or nil"
end

local function string_list(v)
  if type(v) == "string" and v ~= "" then
    return true
  end
  if is_list(v) and #v > 0 then
    for _, s in ipairs(v) do
      if type(s) ~= "string" or s == "" then
        return false, "a string or a list of strings"
      end
    end
    return true
  end
  return false, "a string or a non-empty list of strings"
end

local function fraction(v)
  return type(v) == "number" and v > 0 and v <= 1, "a number in (0, 1]"
end

local function preview_fraction(v)
  return v == false or (type(v) == "number" and v > 0 and v < 1), "false or a number in (0, 1)"
end

local function key_or_keys(v)
  return v == false or string_list(v), "a key, a list of keys, or false"
end

local CHECKS = {
  socket = optional_string,
  cmd = string_list,
  autostart = boolean,
  start_timeout_ms = positive_int,
  request_timeout_ms = positive_int,
  workspace = optional_string,
  picker = one_of(PICKERS),
  debounce_ms = non_negative_int,
  limit = function(v)
    local ok = type(v) == "number" and v >= 1 and v <= 200 and math.floor(v) == v
    return ok, "a whole number from 1 to 200"
  end,
  stages = {
    lexical = boolean,
    semantic = boolean,
    rerank = boolean,
    _check = function(v)
      return v.lexical or v.semantic, "lexical or semantic on (a search needs one of them)"
    end,
  },
  search_opts = function(v)
    if type(v) ~= "table" or (next(v) ~= nil and is_list(v)) then
      return false, "a table of search.query options"
    end
    for _, key in ipairs({ "stages", "mode", "limit" }) do
      if v[key] ~= nil then
        return false, "search.query options other than " .. key .. " (set `stages` and `limit` instead)"
      end
    end
    return true
  end,
  refresh_on_save = boolean,
  backlinks = one_of(BACKLINKS),
  layout = {
    width = fraction,
    height = fraction,
    preview = preview_fraction,
    border = function(v)
      return type(v) == "string" or is_list(v), "a border name or a list of border characters"
    end,
  },
  keys = {},
}
for key in pairs(M.defaults.keys) do
  CHECKS.keys[key] = key_or_keys
end

local function closest(name, candidates)
  local best, best_d
  for cand in pairs(candidates) do
    if type(cand) == "string" and cand:sub(1, 1) ~= "_" then
      -- a cheap distance: common prefix length and length difference
      local p = 0
      while p < #name and p < #cand and name:sub(p + 1, p + 1) == cand:sub(p + 1, p + 1) do
        p = p + 1
      end
      local d = math.max(#name, #cand) - p
      if not best_d or d < best_d then
        best, best_d = cand, d
      end
    end
  end
  if best and best_d <= math.max(2, math.floor(#name / 2)) then
    return best
  end
end

--- Merge `user` into `base` under the checks; collect problems as strings.
local function merge(base, user, checks, prefix, problems)
  if user == nil then
    return base
  end
  if type(user) ~= "table" or (next(user) ~= nil and is_list(user)) then
    table.insert(problems, string.format("%s: expected a table, got %s", prefix ~= "" and prefix or "options", vim.inspect(user)))
    return base
  end
  local out = vim.deepcopy(base)
  for key, value in pairs(user) do
    local name = prefix == "" and tostring(key) or (prefix .. "." .. tostring(key))
    local check = checks[key]
    if check == nil or (type(key) == "string" and key:sub(1, 1) == "_") then
      local hint = type(key) == "string" and closest(key, checks)
      table.insert(problems, string.format("unknown option %s%s", name, hint and (" (did you mean " .. (prefix == "" and "" or prefix .. ".") .. hint .. "?)") or ""))
    elseif type(check) == "table" then
      local merged = merge(out[key] or {}, value, check, name, problems)
      local ok, why = true, nil
      if check._check then
        ok, why = check._check(merged)
      end
      if ok then
        out[key] = merged
      else
        table.insert(problems, string.format("%s: expected %s", name, why))
      end
    else
      local ok, why = check(value)
      if ok then
        out[key] = type(value) == "table" and vim.deepcopy(value) or value
      else
        table.insert(problems, string.format("%s: expected %s, got %s", name, why, vim.inspect(value)))
      end
    end
  end
  return out
end

--- Check `user` options over the defaults. Returns the merged options and a
--- list of problems (each a sentence naming the option).
---@return table options, string[] problems
function M.build(...)
  local problems = {}
  local out = vim.deepcopy(M.defaults)
  for i = 1, select("#", ...) do
    out = merge(out, select(i, ...), CHECKS, "", problems)
  end
  if type(out.cmd) == "string" then
    out.cmd = { out.cmd }
  end
  return out, problems
end

local current ---@type table?
local setup_opts ---@type table?

local function report(problems, where)
  if #problems > 0 then
    vim.notify(
      string.format("autodoc: bad option%s in %s (the default is kept):\n  %s", #problems > 1 and "s" or "", where, table.concat(problems, "\n  ")),
      vim.log.levels.ERROR
    )
  end
end

--- The options in force (built on first use from vim.g.autodoc and setup()).
function M.get()
  if not current then
    local opts, problems_g = M.build(vim.g.autodoc)
    local problems_s
    report(problems_g, "vim.g.autodoc")
    if setup_opts then
      local merged
      merged, problems_s = M.build(vim.g.autodoc, setup_opts)
      -- problems_s repeats vim.g's; report only setup's own
      local seen = {}
      for _, p in ipairs(problems_g) do
        seen[p] = true
      end
      local own = vim.tbl_filter(function(p)
        return not seen[p]
      end, problems_s)
      report(own, "setup()")
      opts = merged
    end
    current = opts
  end
  return current
end

--- setup({...}): optional. Later calls replace earlier ones.
function M.setup(opts)
  setup_opts = opts or {}
  current = nil
  return M.get()
end

--- Forget the built options (vim.g.autodoc is read again on next use).
function M.reset()
  current = nil
  setup_opts = nil
end

--- The socket the options name (`socket`), or nil: then the daemon is the one serving the
--- store, found by asking `<cmd> socket` (daemon.locate).
function M.socket_path(opts)
  opts = opts or M.get()
  if opts.socket then
    return vim.fn.expand(opts.socket)
  end
end

--- The default socket as this plugin knew it before it asked `<cmd> socket`: where to look
--- when `cmd` cannot be run at all and nothing names another store (client.lua).
function M.default_socket()
  local env = vim.env.AUTODOC_SOCKET
  if env and env ~= "" then
    return vim.fn.expand(env)
  end
  local run = vim.env.XDG_RUNTIME_DIR
  if run and run ~= "" and vim.fn.isdirectory(run) == 1 then
    return run .. "/autodoc/autodoc.sock"
  end
  local uv = vim.uv or vim.loop
  return string.format("/tmp/autodoc-%d/autodoc.sock", uv.getuid())
end

M.STAGES = STAGES
M.PICKERS = PICKERS
M._is_list = is_list

return M
