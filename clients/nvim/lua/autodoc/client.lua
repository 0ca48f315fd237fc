--- The transport: JSON-RPC 2.0 to the daemon over its Unix socket (a libuv
--- pipe), one JSON text per line.
---
--- Input: requests (method, params, callback) and notification handlers.
--- Output: callbacks called on the main loop with (err, result), where err is
--- the daemon's {code, message, data} or a client error (errors.lua).
---
--- - Connects lazily on the first request, to the daemon serving the store
---   (`<cmd> socket`, which starts it with `autostart`: daemon.locate), or,
---   with the `socket` option, to that socket; when nothing answers there and
---   `autostart` is on, starts `<cmd> serve --socket <socket>` (detached, its
---   log in stdpath("log")/autodoc-daemon.log) and waits for it to listen.
--- - A lost connection fails the requests in flight (a request sent with
---   `retry` is sent again once, on a new connection); while something listens
---   for pushes (changes.changed, embedding.progress, connect handlers) the
---   client reconnects on its own with backoff and restores its
---   changes.subscribe subscriptions.
--- - Starting a daemon is daemon.lua's job.
--- - cancel(id) sends $/cancelRequest and forgets the request: its answer,
---   when it still comes, is dropped.
local config = require("autodoc.config")
local daemon = require("autodoc.daemon")
local errors = require("autodoc.errors")

local uv = vim.uv or vim.loop

local M = {}

M.PROTOCOL_MAJOR = 1
local LOG_SIZE = 200
local RECONNECT_MIN_MS = 100
local RECONNECT_MAX_MS = 2000
local START_POLL_MS = 50

local HAS_LUANIL = (function()
  local ok, v = pcall(vim.json.decode, '{"a":null}', { luanil = { object = true, array = true } })
  return ok and type(v) == "table" and v.a == nil
end)()

local function strip_nulls(v)
  if v == vim.NIL then
    return nil
  end
  if type(v) == "table" then
    for k, x in pairs(v) do
      v[k] = strip_nulls(x)
    end
  end
  return v
end

local function decode(line)
  local ok, msg
  if HAS_LUANIL then
    ok, msg = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
  else
    ok, msg = pcall(vim.json.decode, line)
    if ok then
      msg = strip_nulls(msg)
    end
  end
  if ok and type(msg) == "table" then
    return msg
  end
end

local function now_ms()
  return uv.now()
end

---@class autodoc.Client
local Client = {}
Client.__index = Client

--- A client for one store's daemon. opts: socket (nil: the store's daemon, located by
--- `<cmd> socket`), cmd, autostart, start_timeout_ms, request_timeout_ms.
function M.new(opts)
  local self = setmetatable({}, Client)
  self.opts = opts
  self.socket = opts.socket -- with no `socket` option: the last one located
  self.store = nil -- what `<cmd> socket` said: {store, store_from, socket, pid, …}
  self.state = "idle" -- idle | connecting | connected | closed
  self.pipe = nil
  self.next_id = 0
  self.pending = {} -- id -> {cb, method, params, opts, sent, timer}
  self.queue = {} -- messages waiting for a connection
  self.handlers = {} -- method -> {fn...}
  self.connect_handlers = {}
  self.subscriptions = {} -- workspace name or "*" -> true
  self.generation = 0 -- connections made so far
  self.sent = {} -- the last LOG_SIZE messages sent (for :checkhealth and tests)
  self.stats = { dropped = 0, reconnects = 0, started = 0 }
  self.server_info = nil
  self.daemon = nil -- {pid, log} of the daemon this client started
  self._buffer = ""
  return self
end

local function log_sent(self, msg)
  table.insert(self.sent, { id = msg.id, method = msg.method, params = msg.params, time = now_ms() })
  if #self.sent > LOG_SIZE then
    table.remove(self.sent, 1)
  end
end

function Client:is_connected()
  return self.state == "connected"
end

-- -- framing -------------------------------------------------------------------------

function Client:_write(msg)
  log_sent(self, msg)
  local ok, text = pcall(vim.json.encode, msg)
  if not ok then
    error("autodoc: cannot encode " .. tostring(msg.method) .. ": " .. tostring(text))
  end
  self.pipe:write(text .. "\n", function(err)
    if err then
      vim.schedule(function()
        self:_on_close(self.pipe, err)
      end)
    end
  end)
end

function Client:_on_chunk(pipe, chunk)
  -- in libuv's callback: only string work here; dispatch on the main loop
  local data = self._buffer .. chunk
  local lines = {}
  local start = 1
  while true do
    local nl = data:find("\n", start, true)
    if not nl then
      break
    end
    local line = data:sub(start, nl - 1)
    if line:sub(-1) == "\r" then
      line = line:sub(1, -2)
    end
    if line:find("%S") then
      table.insert(lines, line)
    end
    start = nl + 1
  end
  self._buffer = data:sub(start)
  if #lines > 0 then
    vim.schedule(function()
      if self.pipe ~= pipe then
        return -- a connection that has since been replaced
      end
      for _, line in ipairs(lines) do
        local msg = decode(line)
        if msg then
          self:_dispatch(msg)
        end
      end
    end)
  end
end

function Client:_dispatch(msg)
  if msg.method == nil then
    if msg.id == nil then
      return -- an error about a frame we sent that was not JSON: nothing to match it to
    end
    local p = self.pending[msg.id]
    if not p then
      self.stats.dropped = self.stats.dropped + 1 -- cancelled or timed out meanwhile
      return
    end
    self.pending[msg.id] = nil
    if p.timer then
      p.timer:stop()
      p.timer:close()
    end
    if p.cb then
      p.cb(msg.error, msg.result)
    end
    return
  end
  if msg.id ~= nil then
    return -- the daemon sends no requests
  end
  for _, fn in ipairs(self.handlers[msg.method] or {}) do
    local ok, err = pcall(fn, msg.params)
    if not ok then
      vim.notify("autodoc: a handler of " .. msg.method .. " failed: " .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

-- -- connecting ----------------------------------------------------------------------

local function try_connect(path, cb)
  local pipe = uv.new_pipe(false)
  local ok, err = pcall(pipe.connect, pipe, path, function(err)
    vim.schedule(function()
      if err then
        if not pipe:is_closing() then
          pipe:close()
        end
        cb(err)
      else
        cb(nil, pipe)
      end
    end)
  end)
  if not ok then
    if not pipe:is_closing() then
      pipe:close()
    end
    vim.schedule(function()
      cb(tostring(err))
    end)
  end
end

function Client:_attach(pipe)
  self.pipe = pipe
  self.state = "connected"
  self._buffer = ""
  self.generation = self.generation + 1
  if self.generation > 1 then
    self.stats.reconnects = self.stats.reconnects + 1
  end
  pipe:read_start(function(err, chunk)
    if err or not chunk then
      vim.schedule(function()
        self:_on_close(pipe, err)
      end)
    else
      self:_on_chunk(pipe, chunk)
    end
  end)
  -- what every connection needs first: the daemon's identity, then the subscriptions
  self:request("server.info", {}, function(err, info)
    if not err and info then
      self.server_info = info
      self:_check_protocol(info)
    end
  end)
  for ws in pairs(self.subscriptions) do
    self:request("changes.subscribe", { ws ~= "*" and ws or vim.NIL })
  end
  local queue = self.queue
  self.queue = {}
  for _, item in ipairs(queue) do
    if item.id and self.pending[item.id] then
      self.pending[item.id].sent = true
      self:_write(item)
    elseif not item.id then
      self:_write(item)
    end
  end
  for _, fn in ipairs(self.connect_handlers) do
    local ok, e = pcall(fn, self.generation)
    if not ok then
      vim.notify("autodoc: a connect handler failed: " .. tostring(e), vim.log.levels.ERROR)
    end
  end
end

function Client:_check_protocol(info)
  local major = tonumber(tostring(info.protocol_version or ""):match("^(%d+)"))
  if major ~= M.PROTOCOL_MAJOR and not self._warned_protocol then
    self._warned_protocol = true
    vim.notify(
      string.format(
        "autodoc: the daemon speaks protocol %s; this plugin speaks %d.x (see :checkhealth autodoc)",
        tostring(info.protocol_version),
        M.PROTOCOL_MAJOR
      ),
      vim.log.levels.WARN
    )
  end
end

--- Start the daemon for this client's socket (see daemon.lua).
function Client:_start_daemon()
  local state, err = daemon.start(self.opts.cmd, self.socket)
  if state then
    self.daemon = state
    self.stats.started = self.stats.started + 1
  end
  return state, err
end

function Client:_unreachable(reason)
  local hint = self.opts.autostart and "" or " (autostart is off: run `autodoc serve --socket`)"
  if not self.socket then
    return errors.client(errors.UNREACHABLE, string.format("no daemon answers%s%s", reason and (": " .. reason) or "", hint))
  end
  return errors.client(
    errors.UNREACHABLE,
    string.format("no daemon answers at %s%s%s", self.socket, reason and (": " .. reason) or "", hint)
  )
end

--- Whether `cmd` may be skipped when it cannot be run: nothing names a store but the default.
local function default_store_only(cmd)
  local store = vim.env.AUTODOC_STORE
  return #cmd == 1 and (store == nil or store == "")
end

--- Ask `<cmd> socket` for the store's daemon (starting it when `start`); cb(err) once
--- self.socket is its socket, or the error to fail with.
function Client:_locate(start, cb)
  daemon.locate(self.opts.cmd, start, self.opts.start_timeout_ms, function(err, info)
    if info then
      self.store = info
    end
    self.cannot_ask = nil
    if err and err.spawn_failed and default_store_only(self.opts.cmd) then
      -- no `autodoc` to ask (not on Neovim's PATH): a daemon started by other means may still
      -- listen where the default store's does
      self.socket, self.cannot_ask = config.default_socket(), err
      return cb(nil)
    end
    if err then
      return cb(err)
    end
    if info.started then
      self.daemon = { pid = info.pid, log = info.log }
      self.stats.started = self.stats.started + 1
    end
    self.socket = info.socket
    cb(nil)
  end)
end

--- A connect attempt ended: true when nothing is left to do (the client stopped connecting
--- meanwhile, and the pipe was closed; or the pipe is attached).
function Client:_settled(pipe)
  if self.state ~= "connecting" then
    if pipe then
      pipe:close()
    end
    return true
  end
  if pipe then
    self:_attach(pipe)
    return true
  end
  return false
end

function Client:_ensure()
  if self.state ~= "idle" then
    return
  end
  self.state = "connecting"
  if not self.opts.socket then
    return self:_locate(self.opts.autostart, function(err)
      if self.state ~= "connecting" then
        return
      end
      if err then
        return self:_fail_queue(err)
      end
      try_connect(self.socket, function(cerr, pipe)
        if self:_settled(pipe) then
          return
        end
        local why = self:_unreachable(tostring(cerr))
        if self.cannot_ask then
          why = errors.client(errors.START_FAILED, self.cannot_ask.message .. ", and " .. why.message)
        end
        self:_fail_queue(why)
      end)
    end)
  end
  local started, deadline
  local function attempt()
    try_connect(self.socket, function(err, pipe)
      if self:_settled(pipe) then
        return
      end
      if not started and self.opts.autostart then
        local state, start_err = self:_start_daemon()
        if not state then
          return self:_fail_queue(start_err)
        end
        started = state
        deadline = now_ms() + self.opts.start_timeout_ms
      end
      if started then
        if started.exited then
          -- it may have lost a race with another daemon that now listens: one more try
          if not started.retried then
            started.retried = true
            return vim.defer_fn(attempt, START_POLL_MS)
          end
          local why = daemon.log_tail(started.log, 3)
          return self:_fail_queue(errors.client(
            errors.START_FAILED,
            string.format("`%s` exited with %s%s", table.concat(started.cmd, " "), tostring(started.code), why ~= "" and (":\n" .. why) or "")
          ))
        end
        if now_ms() < deadline then
          return vim.defer_fn(attempt, START_POLL_MS)
        end
        return self:_fail_queue(errors.client(
          errors.START_FAILED,
          string.format("started `%s` but it did not listen within %d ms (log: %s)", table.concat(started.cmd, " "), self.opts.start_timeout_ms, started.log)
        ))
      end
      self:_fail_queue(self:_unreachable(tostring(err)))
    end)
  end
  attempt()
end

function Client:_fail_queue(err)
  self.state = "idle"
  local queue = self.queue
  self.queue = {}
  for _, item in ipairs(queue) do
    local p = item.id and self.pending[item.id]
    if p then
      self.pending[item.id] = nil
      if p.timer then
        p.timer:stop()
        p.timer:close()
      end
      if p.cb then
        p.cb(err, nil)
      end
    end
  end
  self:_maybe_watch()
end

function Client:_on_close(pipe, err)
  if pipe == nil or self.pipe ~= pipe then
    return
  end
  self.pipe = nil
  if not pipe:is_closing() then
    pipe:close()
  end
  if self.state == "closed" then
    return
  end
  self.state = "idle"
  self.server_info = nil
  local lost = errors.client(errors.DISCONNECTED, "the daemon closed the connection" .. (err and (": " .. tostring(err)) or ""))
  local retry = {}
  for id, p in pairs(self.pending) do
    if p.sent then
      if p.opts.retry and not p.retried then
        p.retried = true
        p.sent = false
        table.insert(retry, { id = id, msg = p.msg })
      else
        self.pending[id] = nil
        if p.timer then
          p.timer:stop()
          p.timer:close()
        end
        if p.cb then
          p.cb(lost, nil)
        end
      end
    end
  end
  table.sort(retry, function(a, b)
    return a.id < b.id
  end)
  for _, r in ipairs(retry) do
    table.insert(self.queue, r.msg)
  end
  if #self.queue > 0 then
    self:_ensure()
  else
    self:_maybe_watch()
  end
end

--- Whether something waits for pushes (then a lost connection is re-made at once).
function Client:_wants_push()
  if #self.connect_handlers > 0 then
    return true
  end
  for _, list in pairs(self.handlers) do
    if #list > 0 then
      return true
    end
  end
  return false
end

--- Reconnect in the background (never starting a daemon) while pushes are wanted.
function Client:_maybe_watch()
  if self._watching or self.state ~= "idle" or not self:_wants_push() then
    return
  end
  self._watching = true
  local delay = RECONNECT_MIN_MS
  local function try(cb)
    if self.opts.socket then
      return try_connect(self.socket, cb)
    end
    -- the store's daemon may come back on another socket: ask again (never starting one)
    self:_locate(false, function(err)
      if err then
        return cb(err)
      end
      try_connect(self.socket, cb)
    end)
  end
  local function step()
    if self.state ~= "idle" or not self:_wants_push() then
      self._watching = false
      return
    end
    try(function(err, pipe)
      if self.state ~= "idle" or not self:_wants_push() then
        if pipe then
          pipe:close()
        end
        self._watching = false
        return
      end
      if pipe then
        self._watching = false
        return self:_attach(pipe)
      end
      delay = math.min(delay * 2, RECONNECT_MAX_MS)
      vim.defer_fn(step, delay)
    end)
  end
  vim.defer_fn(step, delay)
end

-- -- the API -------------------------------------------------------------------------

--- Send a request. cb(err, result) runs on the main loop (not at all after cancel()).
--- opts: retry (send again once on a new connection when the connection drops),
--- timeout_ms. Returns the request id.
function Client:request(method, params, cb, opts)
  opts = opts or {}
  if self.state == "closed" then
    if cb then
      vim.schedule(function()
        cb(errors.client(errors.DISCONNECTED, "the client is closed"), nil)
      end)
    end
    return nil
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  local msg = { jsonrpc = "2.0", id = id, method = method, params = params == nil and vim.empty_dict() or params }
  local p = { cb = cb, method = method, msg = msg, opts = opts, sent = false }
  self.pending[id] = p
  local timeout = opts.timeout_ms or self.opts.request_timeout_ms
  if timeout and timeout > 0 then
    p.timer = uv.new_timer()
    p.timer:start(timeout, 0, vim.schedule_wrap(function()
      if self.pending[id] ~= p then
        return
      end
      self:cancel(id)
      if cb then
        cb(errors.client(errors.TIMEOUT, string.format("%s got no answer within %d ms", method, timeout)), nil)
      end
    end))
  end
  if self.state == "connected" then
    p.sent = true
    self:_write(msg)
  else
    table.insert(self.queue, msg)
    self:_ensure()
  end
  return id
end

--- Send a notification (no answer).
function Client:notify(method, params)
  local msg = { jsonrpc = "2.0", method = method, params = params == nil and vim.empty_dict() or params }
  if self.state == "connected" then
    self:_write(msg)
  elseif self.state ~= "closed" then
    table.insert(self.queue, msg)
    self:_ensure()
  end
end

--- Cancel a request: the daemon is told ($/cancelRequest) and its answer dropped.
function Client:cancel(id)
  local p = id and self.pending[id]
  if not p then
    return false
  end
  self.pending[id] = nil
  if p.timer then
    p.timer:stop()
    p.timer:close()
  end
  if p.sent then
    if self.state == "connected" then
      self:_write({ jsonrpc = "2.0", method = "$/cancelRequest", params = { id = id } })
    end
  else
    for i, item in ipairs(self.queue) do
      if item.id == id then
        table.remove(self.queue, i)
        break
      end
    end
  end
  return true
end

--- Call fn(params) for each notification `method`. Returns a function that stops it.
function Client:on(method, fn)
  self.handlers[method] = self.handlers[method] or {}
  table.insert(self.handlers[method], fn)
  return function()
    local list = self.handlers[method] or {}
    for i, f in ipairs(list) do
      if f == fn then
        table.remove(list, i)
        break
      end
    end
  end
end

--- Call fn(generation) after each (re)connection. Returns a function that stops it.
function Client:on_connect(fn)
  table.insert(self.connect_handlers, fn)
  if self.state == "idle" then
    self:_maybe_watch()
  end
  return function()
    for i, f in ipairs(self.connect_handlers) do
      if f == fn then
        table.remove(self.connect_handlers, i)
        break
      end
    end
  end
end

--- Ask for changes.changed and embedding.progress pushes about a workspace
--- (nil: every workspace); kept and restored on every new connection.
function Client:subscribe(workspace, cb)
  local key = workspace or "*"
  if self.subscriptions[key] then
    if cb then
      vim.schedule(cb)
    end
    return
  end
  self.subscriptions[key] = true
  self:request("changes.subscribe", { workspace or vim.NIL }, function(err)
    if err then
      self.subscriptions[key] = nil
      errors.notify(err, "changes.subscribe")
    end
    if cb then
      cb(err)
    end
  end, { retry = true })
end

--- Wait for a request's answer (for :checkhealth and completion). Returns err, result.
function Client:request_sync(method, params, timeout_ms)
  local done, rerr, rres = false, nil, nil
  local id = self:request(method, params, function(err, res)
    done, rerr, rres = true, err, res
  end, { timeout_ms = timeout_ms })
  vim.wait(timeout_ms or self.opts.request_timeout_ms, function()
    return done
  end, 10)
  if not done then
    self:cancel(id)
    return errors.client(errors.TIMEOUT, method .. " got no answer in time"), nil
  end
  return rerr, rres
end

--- The messages sent lately, oldest first (for debugging and tests).
function Client:log()
  return self.sent
end

function Client:close()
  self.state = "closed"
  local pipe = self.pipe
  self.pipe = nil
  if pipe and not pipe:is_closing() then
    pipe:close()
  end
  for id, p in pairs(self.pending) do
    self.pending[id] = nil
    if p.timer then
      p.timer:stop()
      p.timer:close()
    end
  end
  self.queue = {}
end

-- -- the shared client ---------------------------------------------------------------

local shared ---@type autodoc.Client?
local shared_key

--- Options for a client from the plugin's options.
function M.options_from(opts)
  return {
    socket = config.socket_path(opts),
    -- the environment that chooses the store (and a started daemon's socket): a client is
    -- made again when it changes; hashed, as a connection string may hold a password
    env = vim.fn.sha256((vim.env.AUTODOC_STORE or "") .. "\n" .. (vim.env.AUTODOC_SOCKET or "")),
    cmd = opts.cmd,
    autostart = opts.autostart,
    start_timeout_ms = opts.start_timeout_ms,
    request_timeout_ms = opts.request_timeout_ms,
  }
end

--- The plugin's client (made again when the socket or command changed).
function M.get()
  local opts = M.options_from(config.get())
  local key = vim.inspect(opts)
  if not shared or shared_key ~= key then
    local old = shared
    shared = M.new(opts)
    if old then
      -- keep who listens: the handlers move to the new client
      shared.handlers = old.handlers
      shared.connect_handlers = old.connect_handlers
      shared.subscriptions = old.subscriptions
      old.handlers, old.connect_handlers = {}, {}
      old:close()
    end
    shared_key = key
  end
  return shared
end

--- Forget the shared client (closing its connection).
function M.reset()
  if shared then
    shared:close()
  end
  shared, shared_key = nil, nil
end

M.Client = Client
return M
