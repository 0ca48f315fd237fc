--- The plugin's highlight groups, linked to standard ones by default (a
--- colour scheme or the user may set them; `default = true` keeps theirs).
local M = {}

M.LINKS = {
  AutodocMatch = "Search", -- matched words in the hit list and the preview
  AutodocPath = "Directory",
  AutodocLnum = "LineNr",
  AutodocBreadcrumb = "Comment",
  AutodocSelection = "PmenuSel",
  AutodocSpan = "CursorLine", -- the hit's line span in the preview
  AutodocTitle = "FloatTitle",
  AutodocBorder = "FloatBorder",
  AutodocStageOn = "DiagnosticOk",
  AutodocStageOff = "Comment",
  AutodocWarn = "DiagnosticWarn",
  AutodocError = "DiagnosticError",
  AutodocProgress = "Comment",
}

local done = false

function M.define()
  for group, link in pairs(M.LINKS) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
  if not done then
    done = true
    vim.api.nvim_create_autocmd("ColorScheme", {
      group = vim.api.nvim_create_augroup("autodoc.highlight", { clear = true }),
      callback = M.define,
    })
  end
end

return M
