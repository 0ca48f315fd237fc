--- Errors: the daemon's JSON-RPC errors ({code, message, data}) and the
--- client's own (no daemon, connection lost, timeout), mapped to one message
--- format and one notification level in one place.
local M = {}

local levels = vim.log.levels

-- Client-side errors carry a name and no numeric code.
M.UNREACHABLE = "client.unreachable"
M.DISCONNECTED = "client.disconnected"
M.TIMEOUT = "client.timeout"
M.START_FAILED = "client.start_failed"

M.CANCELLED = -32800

-- The daemon's codes whose answer is a state to report, not a failure.
local WARN_CODES = {
  [-32065] = true, -- rpc.unsupported: semantic-only search with no model
  [-32067] = true, -- rpc.embed_failed
  [-32069] = true, -- rpc.switching
  [-32020] = true, -- server.shutting_down
  [-32003] = true, -- document.not_found
  [-32005] = true, -- changes.cursor_expired
  [-32006] = true, -- document.generation_gone: the hit is stale, search again
}

--- A client-side error.
function M.client(name, message)
  return { message = message, data = { name = name } }
end

function M.name(err)
  return type(err) == "table" and type(err.data) == "table" and err.data.name or nil
end

function M.is_cancelled(err)
  return type(err) == "table" and err.code == M.CANCELLED
end

--- The level to show an error at (nil: do not show it).
function M.level(err)
  if M.is_cancelled(err) then
    return nil
  end
  if type(err) == "table" and WARN_CODES[err.code] then
    return levels.WARN
  end
  return levels.ERROR
end

--- "autodoc: <message> (<code> <name>)"
function M.format(err, context)
  if type(err) ~= "table" then
    return "autodoc: " .. (context and (context .. ": ") or "") .. tostring(err)
  end
  local tag = {}
  if err.code then
    table.insert(tag, tostring(err.code))
  end
  local name = M.name(err)
  if name then
    table.insert(tag, name)
  end
  local field = type(err.data) == "table" and err.data.field
  local msg = tostring(err.message or "error")
  if field and not msg:find(field, 1, true) then
    msg = field .. ": " .. msg
  end
  return string.format(
    "autodoc: %s%s%s",
    context and (context .. ": ") or "",
    msg,
    #tag > 0 and (" (" .. table.concat(tag, " ") .. ")") or ""
  )
end

--- "<code> <name>: <message>" (the code first: for narrow places such as a border).
function M.short(err)
  if type(err) ~= "table" then
    return tostring(err)
  end
  local tag = vim.tbl_filter(function(x)
    return x ~= nil
  end, { err.code and tostring(err.code) or nil, M.name(err) })
  local text = M.format(err):gsub("^autodoc: ", ""):gsub(" %([^()]*%)$", "")
  return (#tag > 0 and (table.concat(tag, " ") .. ": ") or "") .. text
end

--- Show an error with vim.notify at its level. Returns the text shown, or nil.
function M.notify(err, context)
  local level = M.level(err)
  if not level then
    return nil
  end
  local text = M.format(err, context)
  vim.notify(text, level, { title = "autodoc" })
  return text
end

return M
