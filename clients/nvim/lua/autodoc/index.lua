--- :AutodocIndex and refresh on save.
---
--- workspace.reindex (or workspace.index) with its $/progress notifications
--- shown in the command line and passed on as `User AutodocProgress`
--- autocommands (data: token, workspace, done, total, message), then a
--- summary; `User AutodocIndexed` (data: the index report) when it is done.
local client = require("autodoc.client")
local config = require("autodoc.config")
local errors = require("autodoc.errors")

local M = {}

local PROGRESS_ECHO_MS = 100

local function fire(pattern, data)
  vim.api.nvim_exec_autocmds("User", { pattern = pattern, data = data, modeline = false })
end

function M.summary(rep)
  return string.format(
    "autodoc: %s indexed: %d added, %d modified, %d renamed, %d deleted, %d unchanged, %d skipped; %d chunks in %.2f s",
    rep.workspace,
    rep.added or 0,
    rep.modified or 0,
    rep.renamed or 0,
    rep.deleted or 0,
    rep.unchanged or 0,
    #(rep.skipped or {}),
    rep.chunks or 0,
    rep.seconds or 0
  )
end

--- Index one workspace. opts.full: re-read every file (workspace.reindex);
--- opts.quiet: no messages. cb(err, report).
function M.run(name, opts, cb)
  opts = opts or {}
  local c = client.get()
  local method = opts.full and "workspace.reindex" or "workspace.index"
  local id
  local last_echo = 0
  local uv = vim.uv or vim.loop
  local off = c:on("$/progress", function(p)
    if p.token ~= id then
      return
    end
    fire("AutodocProgress", p)
    if opts.quiet then
      return
    end
    local now = uv.now()
    if now - last_echo >= PROGRESS_ECHO_MS or p.done == p.total then
      last_echo = now
      local msg = string.format("autodoc: indexing %s %d/%d %s", p.workspace or name, p.done or 0, p.total or 0, p.message or "")
      vim.api.nvim_echo({ { msg, "AutodocProgress" } }, false, {})
    end
  end)
  id = c:request(method, { name }, function(err, rep)
    off()
    if err then
      if not opts.quiet then
        errors.notify(err, method)
      end
    else
      fire("AutodocIndexed", rep)
      if not opts.quiet then
        vim.notify(M.summary(rep), vim.log.levels.INFO)
      end
    end
    if cb then
      cb(err, rep)
    end
  end, { timeout_ms = 0 })
  return id
end

--- :AutodocIndex [workspace]: reindex it (default: the current workspace).
function M.command(args)
  require("autodoc.workspace").resolve(function(err, ws)
    if err then
      return errors.notify(err, "index")
    end
    if ws then
      M.run(ws.name, { full = true })
    end
  end, { name = args[1] })
end

--- BufWritePost of a Markdown file: when the file is in a workspace the
--- daemon does not watch, ask for an incremental index (the daemon's watcher
--- does it otherwise). Only with a daemon already connected: a save never starts one.
function M.on_save(file)
  if not config.get().refresh_on_save then
    return
  end
  local c = client.get()
  if not c:is_connected() then
    return
  end
  local workspace = require("autodoc.workspace")
  c:request("server.info", vim.empty_dict(), function(err, info)
    if err or not info then
      return
    end
    workspace.list(function(lerr, list)
      if lerr then
        return
      end
      local ws = workspace.containing(list, file)
      if ws and not vim.tbl_contains(info.watching or {}, ws.name) then
        M.run(ws.name, { full = false, quiet = true })
      end
    end)
  end)
end

return M
