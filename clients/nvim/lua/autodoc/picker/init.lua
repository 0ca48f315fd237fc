--- Pickers: which one to use, and the search picker over any of them.
---
--- `picker` option: "builtin" (always there), "telescope", "fzf-lua",
--- "snacks", or "auto": the first of telescope, fzf-lua, snacks that is
--- installed, else builtin. Every picker runs the same search session
--- (search.lua) and the same actions (hits.lua).
local config = require("autodoc.config")
local errors = require("autodoc.errors")

local M = {}

local function available(name)
  if name == "telescope" then
    return pcall(require, "telescope")
  elseif name == "fzf-lua" then
    return pcall(require, "fzf-lua")
  elseif name == "snacks" then
    local ok, snacks = pcall(require, "snacks")
    return ok and snacks and snacks.picker ~= nil
  end
  return name == "builtin"
end

--- The picker to use now.
function M.backend()
  local want = config.get().picker
  if want == "auto" then
    for _, name in ipairs({ "telescope", "fzf-lua", "snacks" }) do
      if available(name) then
        return name
      end
    end
    return "builtin"
  end
  if want ~= "builtin" and not available(want) then
    vim.notify(string.format("autodoc: picker = %q but %s is not installed; using the built-in picker", want, want), vim.log.levels.WARN)
    return "builtin"
  end
  return want
end

local MODULES = {
  builtin = "autodoc.picker.search_builtin",
  telescope = "autodoc.picker.telescope",
  ["fzf-lua"] = "autodoc.picker.fzf",
  snacks = "autodoc.picker.snacks",
}

--- :AutodocSearch [query]: a live search picker over the current workspace.
--- opts: query, workspace (a name), picker (a backend name).
function M.search(opts)
  opts = opts or {}
  local workspace = require("autodoc.workspace")
  local backend = opts.picker or M.backend()
  if backend == "builtin" then
    -- the picker opens at once, so nothing typed meanwhile lands in the buffer
    return require(MODULES.builtin).open(function(cb, before_ask)
      workspace.resolve(cb, { name = opts.workspace, before_ask = before_ask })
    end, opts.query or "")
  end
  workspace.resolve(function(err, ws)
    if err then
      return errors.notify(err, "search")
    end
    if ws then
      require(MODULES[backend]).search(ws, opts.query or "")
    end
  end, { name = opts.workspace })
end

--- A fixed list of items (hits.item-shaped) in a picker, filtered as typed.
function M.items(items, title)
  require("autodoc.picker.search_builtin").static(items, title)
end

return M
