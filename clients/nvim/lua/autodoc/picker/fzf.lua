--- The search in fzf-lua (when installed and chosen): fzf_live over the same
--- session as the built-in picker (search.lua); entries are
--- `path:line:1: breadcrumb  snippet` under the workspace root, so fzf-lua's
--- file actions (open, splits, tab, quickfix) and builtin previewer apply;
--- alt-l / alt-s / alt-r toggle the stages and search again.
--- Not covered by this project's tests (fzf-lua is not on a registry).
local search = require("autodoc.search")

local M = {}

function M.search(ws, query)
  local fzf = require("fzf-lua")
  local session
  local waiting = {}
  local described = search.describe({ toggles = search.toggles() })

  session = search.session(ws, {
    on_update = function(view)
      described = view.described
      if not view.pending then
        for _, done in ipairs(waiting) do
          done(view.items)
        end
        waiting = {}
      end
    end,
  })

  local function entry(it)
    local _, _, rest = it.text:find("^[^ ]+  (.*)$")
    return string.format("%s:%d:1:%s", it.path, it.lnum, rest or it.text)
  end

  local function toggle(stage)
    return {
      fn = function()
        search.toggle(stage)
      end,
      reload = true,
    }
  end

  local actions = vim.deepcopy(fzf.defaults.actions.files)
  actions["alt-l"] = toggle("lexical")
  actions["alt-s"] = toggle("semantic")
  actions["alt-r"] = toggle("rerank")

  fzf.fzf_live(function(args)
    local text = type(args) == "table" and (args[1] or "") or (args or "")
    return function(cb)
      table.insert(waiting, function(items)
        for _, it in ipairs(items) do
          cb(entry(it))
        end
        cb(nil)
      end)
      vim.schedule(function()
        session:set_query(text, true)
      end)
    end
  end, {
    prompt = "autodoc " .. ws.name .. "> ",
    query = query,
    cwd = ws.root,
    exec_empty_query = false,
    previewer = "builtin",
    file_icons = false,
    git_icons = false,
    actions = actions,
    fzf_opts = { ["--no-sort"] = true },
    winopts = {
      title = " autodoc · " .. ws.name .. search.title_text(described.title) .. " ",
      on_close = function()
        session:close()
      end,
    },
  })
end

return M
