--- Starting the daemon: `<cmd> serve --socket <socket>`, detached so that it
--- outlives this editor and serves other clients too, its stderr (its log)
--- appended to stdpath("log")/autodoc-daemon.log.
---
--- Input: the command (executable and global flags) and the socket.
--- Output: a state table {pid, log, cmd, exited, code} updated when the
--- process ends, or nil and a client error.
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
