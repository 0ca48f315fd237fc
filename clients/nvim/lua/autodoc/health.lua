--- :checkhealth autodoc — the executable, the socket, the daemon and its
--- protocol, the workspaces, their embedding model and the ranker.
--- It never starts a daemon: it reports what is there.
local client = require("autodoc.client")
local config = require("autodoc.config")
local daemon = require("autodoc.daemon")
local errors = require("autodoc.errors")

local M = {}

local health = vim.health
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local warn = health.warn or health.report_warn
local error_ = health.error or health.report_error
local info = health.info or health.report_info

local TIMEOUT_MS = 3000

local function version_of(cmd)
  local argv = vim.deepcopy(cmd)
  table.insert(argv, "--version")
  local okc, out = pcall(vim.fn.system, argv)
  if not okc or vim.v.shell_error ~= 0 then
    return nil, vim.trim(tostring(out or ""))
  end
  return vim.trim(out)
end

function M.check()
  start("autodoc: options")
  local opts = config.get()
  local _, problems = config.build(vim.g.autodoc)
  if #problems > 0 then
    for _, p in ipairs(problems) do
      error_("vim.g.autodoc: " .. p)
    end
  else
    ok(string.format("options are valid (picker %s → %s)", opts.picker, require("autodoc.picker").backend()))
  end

  start("autodoc: executable")
  local exe = opts.cmd[1]
  if vim.fn.executable(exe) == 1 then
    local v, why = version_of(opts.cmd)
    if v then
      ok(string.format("%s: %s", vim.fn.exepath(exe), v))
    else
      warn(string.format("%s --version failed: %s", exe, why))
    end
  elseif opts.autostart then
    warn(string.format("`%s` is not executable: the daemon cannot be started from Neovim (set `cmd`, or start `autodoc serve --socket` yourself)", exe))
  else
    info(string.format("`%s` is not executable (autostart is off, so only a running daemon is used)", exe))
  end

  start("autodoc: daemon")
  local c = client.new(vim.tbl_extend("force", client.options_from(opts), { autostart = false }))
  local err, si = c:request_sync("server.info", vim.empty_dict(), TIMEOUT_MS)
  if c.store then
    info(string.format("store %s: its daemon is found through its lease (`%s socket`)", daemon.store_named(c.store), table.concat(opts.cmd, " ")))
  elseif not opts.socket then
    info("store: `" .. table.concat(opts.cmd, " ") .. " socket` did not answer, so the store's daemon is not known")
  end
  if err then
    local where = c.socket and ("socket " .. c.socket) or "daemon"
    error_(string.format("%s: %s", where, (errors.format(err):gsub("^autodoc: ", ""))), {
      opts.autostart and "the daemon is started on the first search (autostart is on)"
        or "start it: " .. table.concat(opts.cmd, " ") .. " serve --socket" .. (opts.socket and (" " .. c.socket) or ""),
    })
    c:close()
    return
  end
  ok(string.format("socket %s answers (daemon pid %s, store %s%s)", c.socket, tostring(si.pid), tostring(si.store), si.writable and "" or ", read-only"))
  local major = tonumber(tostring(si.protocol_version or ""):match("^(%d+)"))
  local line = string.format("daemon %s %s, protocol %s", tostring(si.name), tostring(si.version), tostring(si.protocol_version))
  if major == client.PROTOCOL_MAJOR then
    ok(line .. string.format(" (compatible with this plugin's %d.x)", client.PROTOCOL_MAJOR))
  else
    error_(line .. string.format(": this plugin speaks protocol %d.x", client.PROTOCOL_MAJOR), { "update the plugin or the daemon so that they match" })
  end
  local stages = si.stages or {}
  info(string.format("stages this daemon can run: lexical %s, semantic %s, rerank %s", tostring(stages.lexical), tostring(stages.semantic), tostring(stages.rerank)))
  local models = si.models or {}
  local function describe(list)
    local out = {}
    for _, m in ipairs(list or {}) do
      table.insert(out, type(m) == "table" and (tostring(m.name or m.model or m.provider) .. (m.provider and (" (" .. m.provider .. ")") or "")) or tostring(m))
    end
    return #out > 0 and table.concat(out, ", ") or "none loaded"
  end
  info("embedding models: " .. describe(models.embedding))
  info("rankers: " .. describe(models.ranker))

  start("autodoc: workspaces")
  local lerr, list = c:request_sync("workspace.list", vim.empty_dict(), TIMEOUT_MS)
  if lerr then
    error_("workspace.list: " .. errors.format(lerr))
    c:close()
    return
  end
  local workspaces = list.workspaces or {}
  if #workspaces == 0 then
    warn("no workspaces yet", { ":AutodocWorkspace add (adds the working directory)" })
  end
  local watching = si.watching or {}
  for _, ws in ipairs(workspaces) do
    local serr, st = c:request_sync("workspace.status", { ws.name }, TIMEOUT_MS)
    if serr then
      error_(string.format("%s: workspace.status: %s", ws.name, errors.format(serr)))
    else
      local files = st.files or {}
      local report = st.root_exists == false and error_ or ok
      report(string.format(
        "%s → %s: %d documents indexed of %d on disk, %d chunks%s%s",
        ws.name,
        ws.root,
        files.indexed or 0,
        files.on_disk or 0,
        st.chunks or 0,
        vim.tbl_contains(watching, ws.name) and ", watched" or ", not watched (saves are indexed by the plugin)",
        st.root_exists == false and ", ROOT MISSING" or ""
      ))
      local e = st.embedding or {}
      local emsg = string.format("%s embedding: %s%s (%d/%d embedded%s)", ws.name, tostring(e.state), e.model and (" with " .. e.model) or "", e.embedded or 0, e.total or 0, e.reason and (": " .. e.reason) or "")
      if e.state == "ready" then
        ok(emsg)
      elseif e.state == "failed" then
        error_(emsg)
      elseif e.state == "off" then
        info(emsg)
      else
        warn(emsg)
      end
      local ranker = (ws.config or {}).ranker or {}
      if ranker.provider and ranker.provider ~= "none" then
        ok(string.format("%s ranker: %s%s, window %s", ws.name, ranker.provider, ranker.model and (" " .. ranker.model) or (ranker.path and (" " .. ranker.path) or ""), tostring(ranker.window or 40)))
      else
        info(ws.name .. " ranker: none configured (searches are not re-ranked)")
      end
      if #(st.problems or {}) > 0 then
        warn(string.format("%s: %d document%s indexed with problems (see `autodoc workspace status %s`)", ws.name, #st.problems, #st.problems == 1 and "" or "s", ws.name))
      end
    end
  end
  c:close()
end

return M
