--- The search session shown in the built-in picker, and fixed lists
--- (backlinks) in the same picker.
local builtin = require("autodoc.picker.builtin")
local config = require("autodoc.config")
local errors = require("autodoc.errors")
local search = require("autodoc.search")

local M = {}

--- The open search (picker and session), for tests and scripting.
M.current = nil

--- Open the picker at once (what is typed is kept), then find the
--- workspace (`resolve(cb, before_ask)`, see workspace.resolve) and search.
function M.open(resolve, query)
  local keys = config.get().keys
  local state = { session = nil, workspace = nil }
  local picker
  picker = builtin.open({
    prompt_title = " autodoc search ",
    query = query or "",
    quickfix_title = "autodoc",
    on_query = function(text)
      if state.session then
        state.session:set_query(text)
      end
    end,
    on_close = function()
      if state.session then
        state.session:close()
      end
      if M.current == state then
        M.current = nil
      end
    end,
  })
  state.picker = picker
  M.current = state
  picker:set({}, { { " connecting… ", "AutodocTitle" } }, {})
  for key, stage in pairs({ toggle_lexical = "lexical", toggle_semantic = "semantic", toggle_rerank = "rerank" }) do
    picker:_map(keys[key], function()
      if state.session then
        state.session:toggle(stage)
      else
        search.toggle(stage)
      end
    end, "autodoc: toggle the " .. stage .. " stage")
  end
  local asked = false
  resolve(function(err, ws)
    if asked then
      -- the picker was closed to ask: open a new one with what was typed
      if ws then
        M.open(function(cb)
          cb(nil, ws)
        end, picker.text)
      elseif err then
        errors.notify(err, "search")
      end
      return
    end
    if picker.closed then
      return
    end
    if err then
      local text = errors.notify(err, "search") or errors.format(err)
      picker:set_empty_text(text, "AutodocError")
      picker:set({}, { { " error ", "AutodocError" } }, { { " " .. errors.short(err) .. " ", "AutodocError" } })
      return
    end
    if not ws then
      return picker:close()
    end
    state.workspace = ws
    vim.api.nvim_win_set_config(picker.prompt_win, { title = { { " autodoc search · " .. ws.name .. " ", "AutodocTitle" } }, title_pos = "left" })
    state.session = search.session(ws, {
      on_update = function(view)
        picker.spec.quickfix_title = "autodoc: " .. view.query
        if view.error then
          picker:set_empty_text(errors.format(view.error), "AutodocError")
        elseif view.answer then
          picker:set_empty_text("no hits")
        else
          picker:set_empty_text("")
        end
        picker:set(view.items, view.described.title, view.described.status)
      end,
    })
    state.session:_update()
    if picker.text:find("%S") then
      state.session:set_query(picker.text, true)
    end
  end, function()
    asked = true
    picker:close()
  end)
  return state
end

function M.search(ws, query)
  return M.open(function(cb)
    cb(nil, ws)
  end, query)
end

--- A fixed list, filtered by the words typed (all must occur, any case).
function M.static(items, title)
  local picker
  local function filter(text)
    local words = {}
    for w in text:lower():gmatch("%S+") do
      table.insert(words, w)
    end
    local out = {}
    for _, it in ipairs(items) do
      local hay = it.text:lower()
      local ok = true
      for _, w in ipairs(words) do
        if not hay:find(w, 1, true) then
          ok = false
          break
        end
      end
      if ok then
        table.insert(out, it)
      end
    end
    local t = type(title) == "string" and { { " " .. title .. " · " .. #out .. " ", "AutodocTitle" } } or title
    picker:set(out, t, {})
  end
  picker = builtin.open({
    prompt_title = { { " autodoc ", "AutodocTitle" } },
    quickfix_title = type(title) == "string" and title or "autodoc",
    on_query = filter,
  })
  picker:set_empty_text("nothing")
  filter("")
  return picker
end

return M
