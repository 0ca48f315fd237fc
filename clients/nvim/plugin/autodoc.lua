if vim.g.loaded_autodoc then
  return
end
vim.g.loaded_autodoc = true

local function cmd(name, sub, nargs)
  vim.api.nvim_create_user_command(name, function(a)
    local fargs = vim.deepcopy(a.fargs)
    require("autodoc").command(sub or table.remove(fargs, 1), fargs)
  end, {
    nargs = nargs,
    desc = "autodoc" .. (sub and (" " .. sub) or ""),
    complete = function(arglead, line)
      return require("autodoc").complete(sub, arglead, line)
    end,
  })
end
cmd("Autodoc", nil, "+")
cmd("AutodocSearch", "search", "*")
cmd("AutodocWorkspace", "workspace", "*")
cmd("AutodocIndex", "index", "?")
cmd("AutodocBacklinks", "backlinks", "?")

vim.keymap.set("n", "<Plug>(autodoc-search)", "<Cmd>AutodocSearch<CR>", { desc = "autodoc: search" })
vim.keymap.set("n", "<Plug>(autodoc-search-word)", function()
  require("autodoc").search({ query = vim.fn.expand("<cword>") })
end, { desc = "autodoc: search the word under the cursor" })
vim.keymap.set("n", "<Plug>(autodoc-backlinks)", "<Cmd>AutodocBacklinks<CR>", { desc = "autodoc: backlinks" })
vim.keymap.set("n", "<Plug>(autodoc-index)", "<Cmd>AutodocIndex<CR>", { desc = "autodoc: reindex" })

vim.api.nvim_create_autocmd("BufWritePost", {
  group = vim.api.nvim_create_augroup("autodoc.save", { clear = true }),
  pattern = { "*.md", "*.markdown" },
  callback = function(ev)
    if package.loaded["autodoc.client"] then -- only once the plugin is in use
      require("autodoc.index").on_save(ev.match)
    end
  end,
})
