--- Finding and starting the daemon.
---
--- locate(): which daemon serves the store, asked of `<cmd> socket --json` (with
--- autostart, `--start`: it starts one when none does and waits for it). The command
--- applies the rule every AutoDoc client follows (the store from `cmd`'s --store, else
--- $AUTODOC_STORE, else the default; its daemon found through the store's writer lease):
--- the plugin keeps no copy of it, nor of how a database's connection string names its
--- lease without the password.
---
--- start(): with the `socket` option, `<cmd> serve --socket <socket>`, detached so that it
--- outlives this editor and serves other clients too, its stderr (its log) appended to
--- stdpath("log")/autodoc-daemon.log; a state table {pid, log, cmd, exited, code} updated
--- when the process ends, or nil and a client error.
local errors = require("autodoc.errors")

local uv = vim.uv or vim.loop

local M = {}

--- The daemon's log file when the plugin starts one.
function M.log_path()
  return vim.fn.stdpath("log") .. "/autodoc-daemon.log"
end

--- The last n lines of a file ("" when it cannot be read).
function M.log_tail(path, n)
  local ok, lines = pcall(vim.fn.readfile, path, "", -n)
  if not ok then
    return ""
  end
  return table.concat(lines, "\n")
end

local LOCATE_GRACE_MS = 5000 -- beyond `--wait`, before a command that does not end is stopped

local function store_named(info)
  local how = ({ ["--store"] = "given by --store", AUTODOC_STORE = "from AUTODOC_STORE" })[info.store_from]
  return string.format("%s (%s)", tostring(info.store), how or "the default store")
end
M.store_named = store_named

--- Ask `<cmd> socket --json` for the daemon serving the store; with `start`, start one when
--- none does, waiting up to timeout_ms. cb(nil, info) with info {socket, store, store_from,
--- pid, started, log}, or cb(err, info) (info nil when the command did not answer; err.spawn_failed
--- when it could not be run at all), on the main loop.
function M.locate(cmd, start, timeout_ms, cb)
  local argv = vim.deepcopy(cmd)
  vim.list_extend(argv, { "socket", "--json" })
  if start then
    vim.list_extend(argv, { "--start", "--wait", string.format("%.3f", timeout_ms / 1000) })
  end
  local stdout, stderr = uv.new_pipe(false), uv.new_pipe(false)
  local out, err_out = {}, {}
  local code, left = nil, 3 -- the exit and both pipes' ends
  local handle, pid_or_err, timer

  local function finish()
    left = left - 1
    if left > 0 then
      return
    end
    if timer then
      timer:stop()
      timer:close()
    end
    vim.schedule(function()
      local okj, info = pcall(vim.json.decode, table.concat(out))
      if not okj or type(info) ~= "table" or info.store == nil then
        local why = vim.trim(table.concat(err_out))
        return cb(errors.client(start and errors.START_FAILED or errors.UNREACHABLE, string.format(
          "`%s` failed (exit %s)%s", table.concat(argv, " "), tostring(code), why ~= "" and (": " .. why) or ""
        )), nil)
      end
      for k, v in pairs(info) do
        if v == vim.NIL then
          info[k] = nil
        end
      end
      if code == 0 and info.socket then
        return cb(nil, info)
      end
      local message = string.format("no daemon serves the store %s: %s", store_named(info), tostring(info.why))
      return cb(errors.client(start and errors.START_FAILED or errors.UNREACHABLE, message), info)
    end)
  end

  handle, pid_or_err = uv.spawn(argv[1], {
    args = vim.list_slice(argv, 2),
    stdio = { nil, stdout, stderr },
  }, function(c)
    code = c
    handle:close()
    finish()
  end)
  if not handle then
    stdout:close()
    stderr:close()
    local e = errors.client(errors.START_FAILED, string.format("cannot run %s: %s", argv[1], tostring(pid_or_err)))
    e.spawn_failed = true
    return vim.schedule(function()
      cb(e, nil)
    end)
  end
  for _, p in ipairs({ { stdout, out }, { stderr, err_out } }) do
    local pipe, into = p[1], p[2]
    pipe:read_start(function(_, data)
      if data then
        table.insert(into, data)
      else
        pipe:close()
        finish()
      end
    end)
  end
  timer = uv.new_timer()
  timer:start((start and timeout_ms or 0) + LOCATE_GRACE_MS, 0, function()
    if not handle:is_closing() then
      handle:kill("sigterm")
    end
  end)
end

function M.start(cmd, socket)
  cmd = vim.deepcopy(cmd)
  vim.list_extend(cmd, { "serve", "--socket", socket })
  local log_path = M.log_path()
  vim.fn.mkdir(vim.fn.fnamemodify(log_path, ":h"), "p")
  local fd = uv.fs_open(log_path, "a", 420)
  local state = { exited = false, code = nil, log = log_path, cmd = cmd }
  local handle, pid_or_err
  handle, pid_or_err = uv.spawn(cmd[1], {
    args = vim.list_slice(cmd, 2),
    stdio = { nil, nil, fd },
    detached = true,
  }, function(code, signal)
    state.exited = true
    state.code = code
    state.signal = signal
    if handle and not handle:is_closing() then
      handle:close()
    end
  end)
  if fd then
    uv.fs_close(fd)
  end
  if not handle then
    return nil, errors.client(errors.START_FAILED, string.format("cannot start %s: %s", cmd[1], tostring(pid_or_err)))
  end
  handle:unref() -- Neovim may exit while it runs
  state.pid = pid_or_err
  return state
end

return M
