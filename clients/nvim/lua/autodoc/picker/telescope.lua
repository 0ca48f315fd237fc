--- The search in telescope.nvim (when installed and chosen): the same
--- session as the built-in picker (search.lua), telescope's own look, its
--- file previewer at the hit's line, <M-l>/<M-s>/<M-r> toggles that search
--- again, and the title showing what the daemon did with the stages.
--- Not covered by this project's tests (telescope is not on a registry).
local config = require("autodoc.config")
local search = require("autodoc.search")

local M = {}

local function text_of(chunks)
  return search.title_text(chunks or {})
end

function M.search(ws, query)
  local pickers = require("telescope.pickers")
  local finders = require("telescope.finders")
  local conf = require("telescope.config").values
  local actions = require("telescope.actions")
  local action_state = require("telescope.actions.state")
  local channel = require("plenary.async.control").channel

  local keys = config.get().keys
  local session, picker
  local waiting = {} -- one sender per finder call in flight

  session = search.session(ws, {
    on_update = function(view)
      -- an answer (or an error) ends the finder call waiting for it
      if not view.pending then
        for _, tx in ipairs(waiting) do
          tx(view.items)
        end
        waiting = {}
      end
      if picker and picker.results_border then
        local described = view.described
        pcall(function()
          picker.results_border:change_title(text_of(described.title) .. text_of(described.status))
        end)
      end
    end,
  })

  local function make_finder()
    return finders.new_dynamic({
      fn = function(prompt)
        local tx, rx = channel.oneshot()
        table.insert(waiting, tx)
        vim.schedule(function()
          session:set_query(prompt or "", true)
        end)
        return rx() or {}
      end,
      entry_maker = function(item)
        return {
          value = item,
          display = item.text,
          ordinal = item.text,
          filename = item.filename,
          lnum = item.lnum,
          col = 1,
        }
      end,
    })
  end

  local function toggle(stage)
    return function(bufnr)
      local ok = search.toggle(stage)
      if ok then
        local p = action_state.get_current_picker(bufnr)
        p:refresh(make_finder(), { reset_prompt = false })
      end
    end
  end

  picker = pickers.new({}, {
    prompt_title = "autodoc search · " .. ws.name,
    results_title = text_of(search.describe({ toggles = search.toggles() }).title),
    default_text = query,
    finder = make_finder(),
    sorter = require("telescope.sorters").empty(),
    previewer = conf.grep_previewer({}),
    attach_mappings = function(bufnr, map)
      for key, stage in pairs({ toggle_lexical = "lexical", toggle_semantic = "semantic", toggle_rerank = "rerank" }) do
        local lhs = keys[key]
        for _, k in ipairs(type(lhs) == "table" and lhs or { lhs }) do
          if k then
            map({ "i", "n" }, k, toggle(stage))
          end
        end
      end
      actions.close:enhance({
        post = function()
          session:close()
        end,
      })
      return true
    end,
  })
  picker:find()
end

return M
