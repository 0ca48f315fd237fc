--- :AutodocBacklinks: the documents that link to the current file
--- (document.backlinks), in the quickfix list or a picker.
local client = require("autodoc.client")
local config = require("autodoc.config")
local errors = require("autodoc.errors")
local hits = require("autodoc.hits")
local workspace = require("autodoc.workspace")

local M = {}

--- Items for document.backlinks' answer (pure).
function M.items(answer, root)
  local out = {}
  for _, b in ipairs(answer.backlinks or {}) do
    local title = b.source_title and b.source_title ~= "" and b.source_title or b.source_path
    local loc = string.format("%s:%d", b.source_path, b.line or 1)
    local what = string.format("%s → %s (%s)", title, b.target or "", b.kind or "link")
    local text = loc .. "  " .. what
    table.insert(out, {
      text = text,
      highlights = { { 0, #b.source_path, "AutodocPath" }, { #b.source_path, #loc, "AutodocLnum" }, { #loc + 2, #text, "AutodocBreadcrumb" } },
      filename = hits.abs(root, b.source_path),
      path = b.source_path,
      lnum = b.line or 1,
      end_lnum = b.line or 1,
      words = {},
      qf_text = what,
      backlink = b,
    })
  end
  return out
end

--- Show the backlinks of `file` (default: the current buffer's). opts.show: quickfix | picker.
function M.run(opts)
  opts = opts or {}
  local file = opts.file or vim.api.nvim_buf_get_name(0)
  if file == "" then
    return vim.notify("autodoc: backlinks: the current buffer has no file", vim.log.levels.WARN)
  end
  workspace.list(function(err, list)
    if err then
      return errors.notify(err, "backlinks")
    end
    local ws, rel = workspace.containing(list, file)
    if not ws then
      return vim.notify("autodoc: backlinks: " .. file .. " is in no workspace", vim.log.levels.WARN)
    end
    client.get():request("document.backlinks", { ws.name, rel }, function(berr, answer)
      if berr then
        return errors.notify(berr, "document.backlinks")
      end
      local items = M.items(answer, ws.root)
      if #items == 0 then
        return vim.notify("autodoc: no document links to " .. rel, vim.log.levels.INFO)
      end
      local title = "autodoc backlinks: " .. rel
      if (opts.show or config.get().backlinks) == "picker" then
        require("autodoc.picker").items(items, title)
      else
        hits.to_quickfix(items, title)
      end
    end, { retry = true })
  end)
end

return M
