--- AutoDoc for Neovim: search a Markdown knowledge base through the AutoDoc
--- daemon. The public API; the commands in plugin/autodoc.lua call it.
---
--- No setup() is needed. setup({...}) (or vim.g.autodoc before first use)
--- changes the options; see :help autodoc-options.
local M = {}

--- Set options (optional). Bad ones are reported and keep their defaults.
function M.setup(opts)
  require("autodoc.config").setup(opts)
  -- a changed socket or command takes effect on the next request
  require("autodoc.client").get()
end

--- Open the search picker. opts: query, workspace, picker.
function M.search(opts)
  require("autodoc.picker").search(opts)
end

--- Reindex a workspace (default: the current one), showing progress.
function M.index(name)
  require("autodoc.index").command({ name })
end

--- The documents linking to the current file. opts.show: "quickfix" | "picker".
function M.backlinks(opts)
  require("autodoc.backlinks").run(opts)
end

--- :AutodocWorkspace with its arguments (a list of strings).
function M.workspace(args)
  require("autodoc.workspace").command(args or {})
end

--- The shared client (for scripting: require("autodoc").client():request(...)).
function M.client()
  return require("autodoc.client").get()
end

local SUB = {
  search = {
    run = function(args)
      M.search({ query = table.concat(args, " ") })
    end,
  },
  workspace = {
    run = function(args)
      M.workspace(args)
    end,
    complete = function(arglead, args)
      return require("autodoc.workspace").complete(arglead, args)
    end,
  },
  index = {
    run = function(args)
      require("autodoc.index").command(args)
    end,
    complete = function(arglead, args)
      if #args <= 1 then
        return require("autodoc.workspace").complete(arglead, { "switch", arglead })
      end
      return {}
    end,
  },
  backlinks = {
    run = function(args)
      M.backlinks({ show = args[1] })
    end,
    complete = function(arglead)
      return vim.tbl_filter(function(s)
        return s:find(arglead, 1, true) == 1
      end, { "quickfix", "picker" })
    end,
  },
}
M.SUBCOMMANDS = { "search", "workspace", "index", "backlinks" }

--- :Autodoc {subcommand} [args] (and the :AutodocSearch family, which name it).
function M.command(sub, fargs)
  local spec = SUB[sub or ""]
  if not spec then
    return vim.notify(
      string.format("autodoc: unknown command %q (one of %s)", tostring(sub), table.concat(M.SUBCOMMANDS, ", ")),
      vim.log.levels.ERROR
    )
  end
  spec.run(fargs or {})
end

--- Completion for :Autodoc (sub = nil) and for one subcommand's command.
function M.complete(sub, arglead, cmdline)
  local words = vim.split(cmdline, "%s+", { trimempty = false })
  table.remove(words, 1) -- the command itself
  if not sub then
    if #words <= 1 then
      return vim.tbl_filter(function(s)
        return s:find(arglead, 1, true) == 1
      end, M.SUBCOMMANDS)
    end
    sub = table.remove(words, 1)
  end
  local spec = SUB[sub]
  if not spec or not spec.complete then
    return {}
  end
  return spec.complete(arglead, words)
end

return M
