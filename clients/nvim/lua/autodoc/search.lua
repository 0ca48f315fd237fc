--- The live search behind every picker: the stage toggles, debounced
--- search.query requests, superseded requests cancelled and their late
--- answers dropped, and a fresh search when the daemon reports a change.
---
--- Input: a workspace ({name, root}) and the query as it is typed.
--- Output: on_update(view) with view = {items, described, answer, error, query}
--- where described = {title, status}, lists of {text, highlight} chunks (describe()),
--- and pending is true while a search is on its way.
local client = require("autodoc.client")
local config = require("autodoc.config")
local errors = require("autodoc.errors")
local hits = require("autodoc.hits")

local uv = vim.uv or vim.loop

local M = {}

local REFRESH_MS = 150 -- wait this long after a change push before searching again

M.ORDER = { "lexical", "semantic", "rerank" }

local toggles ---@type table? this session's stage choice

--- The stage toggles in force this session ({lexical, semantic, rerank} booleans).
function M.toggles()
  if not toggles then
    toggles = vim.deepcopy(config.get().stages)
  end
  return toggles
end

--- Forget this session's stage choice (the `stages` option applies again).
function M.reset_toggles()
  toggles = nil
end

--- Flip one stage. One of lexical and semantic always stays on.
--- Returns true, or false and why not.
function M.toggle(stage)
  local s = M.toggles()
  if s[stage] == nil then
    return false, "no stage " .. tostring(stage)
  end
  local other = stage == "lexical" and "semantic" or stage == "semantic" and "lexical" or nil
  if other and s[stage] and not s[other] then
    return false, "one of lexical and semantic stays on"
  end
  s[stage] = not s[stage]
  return true
end

--- The stages a search asks for, in the protocol's order.
function M.requested(s)
  local out = {}
  for _, stage in ipairs(M.ORDER) do
    if s[stage] then
      table.insert(out, stage)
    end
  end
  return out
end

--- search.query's opts for these toggles and options.
function M.request_opts(s, opts)
  local out = vim.deepcopy(opts.search_opts or {})
  out.limit = opts.limit
  out.stages = M.requested(s)
  return out
end

local function has(list, x)
  return vim.tbl_contains(list or {}, x)
end

--- A daemon's reason, short enough for a footer: "no embedding model is configured for
--- this workspace" → "no embedding model" (what follows a ";" or " (" is detail).
local function short(reason)
  local r = tostring(reason):gsub(" for this workspace", ""):gsub(" is configured", ""):gsub(" are configured", "")
  r = r:gsub("; .*$", ""):gsub(" %(.*$", "")
  return r
end
M.short = short

--- What the picker says about a search: `title` (the toggles and the
--- number of hits) and `status` (what the daemon did with the stages: why
--- one was skipped, "re-ranked by <model>" or "not re-ranked: <why>", or the
--- error). ctx: {toggles, answer?, error?, query?, ranker?}: ranker is the
--- workspace's ranker state as last answered ("off": none is configured, so
--- its box shows [-], on but unable to run). Each a list of {text, hl} chunks.
function M.describe(ctx)
  local s = ctx.toggles
  local a = ctx.answer
  local title, status = {}, {}
  local function add(list, text, hl)
    table.insert(list, { text, hl or "AutodocTitle" })
  end
  local ranker = (a and a.rank and a.rank.state) or ctx.ranker
  add(title, " ")
  for _, stage in ipairs(M.ORDER) do
    if stage == "rerank" and s.rerank and ranker == "off" then
      add(title, "[-]rerank", "AutodocStageOff")
    else
      add(title, s[stage] and ("[x]" .. stage) or ("[ ]" .. stage), s[stage] and "AutodocStageOn" or "AutodocStageOff")
    end
    add(title, " ")
  end
  if ctx.error then
    add(status, " " .. errors.short(ctx.error) .. " ", "AutodocError")
    return { title = title, status = status }
  end
  if not a then
    add(status, ctx.query and ctx.query:find("%S") and " searching… " or " type to search ")
    return { title = title, status = status }
  end
  local n = #(a.hits or {})
  add(title, "· " .. n .. (n == 1 and " hit " or " hits "))
  -- the hits stop where the matches stop (the daemon's relevance floor): say how many it held back,
  -- so an empty list of a word no note holds reads differently from one of a word nothing matched
  local held = tonumber(a.held_back) or 0
  if held > 0 then
    add(title, "· " .. held .. " weak held back ")
  end
  local stages = a.stages or {}
  local skipped = stages.skipped or {}
  local performed = stages.performed or {}
  local function part(text, hl)
    add(status, (#status == 0 and " " or "· ") .. text .. " ", hl)
  end
  -- terse, to fit the footer: a reason that names what is missing ("no embedding model")
  -- stands alone; another one says which stage it stopped
  local function skipped_part(stage, reason)
    local r = short(reason)
    part(r:find("^no ") and r or (stage .. " skipped: " .. r), "AutodocWarn")
  end
  -- rerank first: it decides the order the user sees
  local rank = a.rank or {}
  if has(performed, "rerank") then
    part("re-ranked by " .. tostring(rank.model or "?"), "AutodocStageOn")
  elseif not s.rerank then
    part("rerank off")
  elseif rank.state == "off" then
    part("no ranker")
  else
    local why = skipped.rerank or (rank.error ~= "" and rank.error) or rank.state or "not performed"
    part("not re-ranked: " .. short(why), "AutodocWarn")
  end
  if not s.semantic then
    part("semantic off")
  elseif has(performed, "semantic") then
    part("semantic " .. tostring(a.semantic or "ready"))
  elseif skipped.semantic then
    skipped_part("semantic", skipped.semantic)
  end
  if s.lexical and skipped.lexical then
    skipped_part("lexical", skipped.lexical)
  end
  return { title = title, status = status }
end

--- The title's text (chunks joined).
function M.title_text(chunks)
  local out = {}
  for _, c in ipairs(chunks) do
    table.insert(out, c[1])
  end
  return table.concat(out)
end

---@class autodoc.Session
local Session = {}
Session.__index = Session

--- A live search over one workspace. handlers.on_update(view) is called with
--- every new answer, error or toggle change.
function M.session(ws, handlers)
  local self = setmetatable({}, Session)
  self.ws = ws
  self.handlers = handlers or {}
  self.client = client.get()
  self.opts = config.get()
  self.query = ""
  self.seq = 0
  self.inflight = nil
  self.answer = nil
  self.error = nil
  self.items = {}
  self.semantic_state = nil
  self.ranker_state = nil -- the workspace's ranker as last answered ("off": none configured)
  self.stats = { sent = 0, cancelled = 0, stale = 0, refreshed = 0 }
  self.last_notified = nil
  self.timer = uv.new_timer()
  self.refresh_timer = uv.new_timer()
  self.offs = {
    self.client:on("changes.changed", function(p)
      self:_on_changes(p)
    end),
    self.client:on("embedding.progress", function(p)
      self:_on_embedding(p)
    end),
    self.client:on_connect(function(generation)
      if generation > 1 then
        self:refresh("reconnected")
      end
    end),
  }
  self.client:subscribe(ws.name)
  return self
end

function Session:view()
  return {
    items = self.items,
    described = M.describe({
      toggles = M.toggles(),
      answer = self.answer,
      error = self.error,
      query = self.query,
      ranker = self.ranker_state,
    }),
    answer = self.answer,
    error = self.error,
    query = self.query,
    pending = self.inflight ~= nil, -- a search is on its way (items are the last answer's)
  }
end

function Session:_update()
  if self.closed then
    return
  end
  if self.handlers.on_update then
    self.handlers.on_update(self:view())
  end
end

--- The query changed: search after the debounce (now = true: at once).
function Session:set_query(query, now)
  if query == self.query and not now then
    return
  end
  self.query = query
  self.timer:stop()
  local wait = self.opts.debounce_ms
  if now or wait == 0 then
    return self:run()
  end
  self.timer:start(wait, 0, vim.schedule_wrap(function()
    self:run()
  end))
end

--- Search now for the current query, superseding any search in flight.
function Session:run()
  if self.closed then
    return
  end
  self.timer:stop()
  self.seq = self.seq + 1
  local seq = self.seq
  if self.inflight then
    if self.client:cancel(self.inflight) then
      self.stats.cancelled = self.stats.cancelled + 1
    end
    self.inflight = nil
  end
  local query = self.query
  if not query:find("%S") then
    self.answer, self.error, self.items = nil, nil, {}
    return self:_update()
  end
  local opts = M.request_opts(M.toggles(), self.opts)
  self.last_request = { workspace = self.ws.name, query = query, opts = opts }
  self.stats.sent = self.stats.sent + 1
  self.inflight = self.client:request("search.query", { self.ws.name, query, opts }, function(err, answer)
    if seq ~= self.seq or self.closed then
      self.stats.stale = self.stats.stale + 1 -- a newer search was asked for meanwhile
      return
    end
    self.inflight = nil
    if err then
      self.error, self.answer, self.items = err, nil, {}
      local text = errors.format(err)
      if text ~= self.last_notified then
        self.last_notified = errors.notify(err, "search")
      end
    else
      self.error, self.answer = nil, answer
      self.last_notified = nil
      self.semantic_state = answer.semantic
      self.ranker_state = (answer.rank or {}).state
      local items = {}
      for _, hit in ipairs(answer.hits or {}) do
        table.insert(items, hits.item(hit, self.ws.root, query))
      end
      self.items = items
    end
    self:_update()
  end, { retry = true })
  self:_update()
end

--- Flip a stage and search again at once. Returns true, or false and why not.
function Session:toggle(stage)
  local ok, why = M.toggle(stage)
  if ok then
    self:run()
  else
    vim.notify("autodoc: " .. why, vim.log.levels.WARN)
    self:_update()
  end
  return ok, why
end

--- Search again soon (after a change pushed by the daemon).
function Session:refresh(why)
  if self.closed or not self.query:find("%S") then
    return
  end
  -- pushes that land within one debounce make one search; keep every reason, not the last
  self.pending_why = self.pending_why or {}
  if not vim.tbl_contains(self.pending_why, why) then
    table.insert(self.pending_why, why)
  end
  self.refresh_timer:stop()
  self.refresh_timer:start(REFRESH_MS, 0, vim.schedule_wrap(function()
    if self.closed then
      return
    end
    self.stats.refreshed = self.stats.refreshed + 1
    self.last_refresh = table.concat(self.pending_why or {}, ", ")
    self.pending_why = nil
    self:run()
  end))
end

function Session:_on_changes(p)
  if p and p.workspace == self.ws.name then
    self:refresh("changes")
  end
end

function Session:_on_embedding(p)
  if not p or p.workspace ~= self.ws.name then
    return
  end
  if p.state ~= self.semantic_state then
    self.semantic_state = p.state
    self:refresh("embedding " .. tostring(p.state))
  end
end

function Session:close()
  if self.closed then
    return
  end
  self.closed = true
  if self.inflight then
    self.client:cancel(self.inflight)
    self.inflight = nil
  end
  for _, off in ipairs(self.offs) do
    off()
  end
  for _, t in ipairs({ self.timer, self.refresh_timer }) do
    t:stop()
    if not t:is_closing() then
      t:close()
    end
  end
end

M.Session = Session
return M
