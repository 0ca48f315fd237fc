--- Workspaces: which one a command works on, and :AutodocWorkspace.
---
--- The workspace is, in order: the one chosen this session (:AutodocWorkspace
--- switch), the `workspace` option, the one whose root holds the current
--- file, the one holding the working directory, the only one, else the user
--- picks (vim.ui.select).
local client = require("autodoc.client")
local config = require("autodoc.config")
local errors = require("autodoc.errors")

local uv = vim.uv or vim.loop

local M = {}

M.current = nil ---@type string? chosen this session
M.cache = {} ---@type table[] the last workspace.list answer

local function real(path)
  if not path or path == "" then
    return nil
  end
  return uv.fs_realpath(path) or vim.fs.normalize(path)
end

local function inside(path, root)
  root = root:gsub("/+$", "")
  return path == root or path:sub(1, #root + 1) == root .. "/"
end

--- The workspace (of `list`) whose root holds `path` (the deepest root wins), and the path relative to it.
function M.containing(list, path)
  path = real(path)
  if not path then
    return nil
  end
  local best, best_root
  for _, ws in ipairs(list or {}) do
    for _, root in ipairs({ ws.root, real(ws.root) }) do
      if root and inside(path, root) and (not best_root or #root > #best_root) then
        best, best_root = ws, root:gsub("/+$", "")
      end
    end
  end
  if best then
    return best, path:sub(#best_root + 2)
  end
end

--- cb(err, workspaces)
function M.list(cb)
  client.get():request("workspace.list", vim.empty_dict(), function(err, res)
    if err then
      return cb(err)
    end
    M.cache = res.workspaces or {}
    cb(nil, M.cache)
  end, { retry = true })
end

local function by_name(list, name)
  for _, ws in ipairs(list) do
    if ws.name == name then
      return ws
    end
  end
end

local function names(list)
  return table.concat(
    vim.tbl_map(function(w)
      return w.name
    end, list),
    ", "
  )
end

--- Pick a workspace for a command. cb(err, workspace); err nil and workspace nil when the user backed out.
function M.resolve(cb, opts)
  opts = opts or {}
  M.list(function(err, list)
    if err then
      return cb(err)
    end
    local name = opts.name or M.current or config.get().workspace
    if name then
      local ws = by_name(list, name)
      if ws then
        return cb(nil, ws)
      end
      return cb(errors.client(
        "workspace.not_found",
        string.format("no workspace named %s (there %s: %s)", name, #list == 1 and "is" or "are", #list > 0 and names(list) or "none")
      ))
    end
    local file = vim.api.nvim_buf_get_name(0)
    local ws = (file ~= "" and M.containing(list, file)) or M.containing(list, vim.fn.getcwd())
    if ws then
      return cb(nil, ws)
    end
    if #list == 1 then
      return cb(nil, list[1])
    end
    if #list == 0 then
      return cb(errors.client("workspace.none", "no workspaces yet: add one with :AutodocWorkspace add"))
    end
    if opts.before_ask then
      opts.before_ask()
    end
    vim.ui.select(list, {
      prompt = "autodoc workspace",
      format_item = function(w)
        return string.format("%s  %s", w.name, w.root)
      end,
    }, function(choice)
      if choice then
        M.current = choice.name
      end
      cb(nil, choice)
    end)
  end)
end

--- A workspace name from a folder's name (letters, digits, . _ -).
function M.name_for(path)
  local base = vim.fn.fnamemodify(path:gsub("/+$", ""), ":t")
  local name = base:gsub("[^%w%._%-]", "-"):gsub("^[^%w]+", "")
  if name == "" then
    name = "notes"
  end
  return name:sub(1, 64)
end

function M.show_list()
  M.list(function(err, list)
    if err then
      return errors.notify(err, "workspace.list")
    end
    if #list == 0 then
      return vim.notify("autodoc: no workspaces yet (:AutodocWorkspace add)", vim.log.levels.INFO)
    end
    local lines = {}
    for _, w in ipairs(list) do
      table.insert(lines, string.format("%s %s  %s  (%d documents, %d chunks)", w.name == M.current and "*" or " ", w.name, w.root, w.documents or 0, w.chunks or 0))
    end
    vim.notify("autodoc workspaces:\n" .. table.concat(lines, "\n"), vim.log.levels.INFO)
  end)
end

--- Add a folder (default: the working directory) as a workspace, index it and make it current.
function M.add(name, path, cb)
  path = real(vim.fn.expand(path and path ~= "" and path or vim.fn.getcwd()))
  if vim.fn.isdirectory(path) ~= 1 then
    return errors.notify(errors.client("workspace.bad_root", path .. " is not a folder"), "workspace add")
  end
  name = name and name ~= "" and name or M.name_for(path)
  client.get():request("workspace.add", { name, path }, function(err, ws)
    if err then
      errors.notify(err, "workspace.add")
      return cb and cb(err)
    end
    M.current = ws.name
    vim.notify(string.format("autodoc: added workspace %s → %s; indexing…", ws.name, ws.root), vim.log.levels.INFO)
    require("autodoc.index").run(ws.name, { full = false }, cb)
  end)
end

function M.switch(name, cb)
  local function done(ws)
    if ws then
      M.current = ws.name
      vim.notify("autodoc: searching workspace " .. ws.name .. " (" .. ws.root .. ")", vim.log.levels.INFO)
    end
    if cb then
      cb(ws)
    end
  end
  M.list(function(err, list)
    if err then
      return errors.notify(err, "workspace.list")
    end
    if name and name ~= "" then
      local ws = by_name(list, name)
      if not ws then
        return errors.notify(errors.client("workspace.not_found", string.format("no workspace named %s (%s)", name, names(list))), "switch")
      end
      return done(ws)
    end
    vim.ui.select(list, {
      prompt = "autodoc: switch to workspace",
      format_item = function(w)
        return string.format("%s%s  %s", w.name, w.name == M.current and " (current)" or "", w.root)
      end,
    }, done)
  end)
end

--- :AutodocWorkspace [list | add [name] [path] | switch [name]]; no argument: a menu.
function M.command(args)
  local sub = args[1]
  if sub == "list" then
    return M.show_list()
  elseif sub == "add" then
    return M.add(args[2], args[3])
  elseif sub == "switch" then
    return M.switch(args[2])
  elseif sub ~= nil then
    return vim.notify("autodoc: :AutodocWorkspace takes list, add [name] [path] or switch [name]; got " .. sub, vim.log.levels.ERROR)
  end
  M.list(function(err, list)
    if err then
      return errors.notify(err, "workspace.list")
    end
    local choices = {}
    for _, w in ipairs(list) do
      table.insert(choices, { label = string.format("switch to %s%s  %s", w.name, w.name == M.current and " (current)" or "", w.root), run = function()
        M.switch(w.name)
      end })
    end
    local cwd = vim.fn.getcwd()
    table.insert(choices, { label = "add the working directory (" .. cwd .. ")", run = function()
      M.add(nil, cwd)
    end })
    vim.ui.select(choices, {
      prompt = "autodoc workspaces",
      format_item = function(c)
        return c.label
      end,
    }, function(c)
      if c then
        c.run()
      end
    end)
  end)
end

--- Completion for :AutodocWorkspace (uses the last list seen; asks once when there is none).
function M.complete(arglead, args)
  if #args <= 1 then
    return vim.tbl_filter(function(s)
      return s:find(arglead, 1, true) == 1
    end, { "list", "add", "switch" })
  end
  if args[1] == "switch" and #args == 2 then
    if #M.cache == 0 and client.get():is_connected() then
      local err, res = client.get():request_sync("workspace.list", vim.empty_dict(), 500)
      if not err and res then
        M.cache = res.workspaces or {}
      end
    end
    local out = {}
    for _, w in ipairs(M.cache) do
      if w.name:find(arglead, 1, true) == 1 then
        table.insert(out, w.name)
      end
    end
    return out
  end
  if args[1] == "add" and #args == 3 then
    return vim.fn.getcompletion(arglead, "dir")
  end
  return {}
end

return M
