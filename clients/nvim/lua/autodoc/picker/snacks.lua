--- The search in snacks.nvim's picker (when installed and chosen): a live
--- finder over the same session as the built-in picker (search.lua), the
--- stage toggles as actions, and the title showing what the daemon did.
--- Not covered by this project's tests (snacks is not on a registry).
local config = require("autodoc.config")
local search = require("autodoc.search")

local M = {}

function M.search(ws, query)
  local Snacks = require("snacks")
  local keys = config.get().keys
  local session
  local waiting = {}
  local described = search.describe({ toggles = search.toggles() })

  session = search.session(ws, {
    on_update = function(view)
      described = view.described
      if not view.pending then
        for _, resume in ipairs(waiting) do
          resume(view.items)
        end
        waiting = {}
      end
    end,
  })

  local function title()
    return "autodoc · " .. ws.name .. search.title_text(described.title) .. search.title_text(described.status)
  end

  local input_keys = {}
  local actions = {}
  for key, stage in pairs({ toggle_lexical = "lexical", toggle_semantic = "semantic", toggle_rerank = "rerank" }) do
    local name = "autodoc_" .. stage
    actions[name] = function(picker)
      if search.toggle(stage) then
        picker:find()
      end
    end
    local lhs = keys[key]
    for _, k in ipairs(type(lhs) == "table" and lhs or { lhs }) do
      if k then
        input_keys[k] = { name, mode = { "i", "n" } }
      end
    end
  end

  Snacks.picker.pick({
    title = title(),
    search = query,
    live = true,
    supports_live = true,
    finder = function(_, ctx)
      local text = ctx.filter.search or ""
      return function(emit)
        local items
        table.insert(waiting, function(result)
          items = result
          ctx.async:resume()
        end)
        vim.schedule(function()
          session:set_query(text, true)
        end)
        ctx.async:suspend()
        for i, it in ipairs(items or {}) do
          emit({
            idx = i,
            score = 1000 - i, -- the daemon's order
            text = it.text,
            file = it.filename,
            pos = { it.lnum, 0 },
            end_pos = { it.end_lnum, 0 },
            autodoc = it,
          })
        end
        ctx.picker.title = title()
        vim.schedule(function()
          pcall(ctx.picker.update_titles, ctx.picker)
        end)
      end
    end,
    format = function(item)
      local it = item.autodoc
      local out = {}
      local pos = 0
      for _, h in ipairs(it.highlights or {}) do
        if h[1] > pos then
          table.insert(out, { it.text:sub(pos + 1, h[1]) })
        end
        if h[2] > h[1] and h[1] >= pos then
          table.insert(out, { it.text:sub(h[1] + 1, h[2]), h[3] })
          pos = h[2]
        end
      end
      table.insert(out, { it.text:sub(pos + 1) })
      return out
    end,
    sort = { fields = { "idx" } },
    matcher = { sort_empty = false },
    actions = actions,
    win = { input = { keys = input_keys } },
    on_close = function()
      session:close()
    end,
  })
end

return M
