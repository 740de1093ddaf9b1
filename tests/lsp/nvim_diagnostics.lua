-- Drive a real Neovim (headless) against `memlint lsp`: open a file, wait for the
-- diagnostics Neovim itself shows, ask for a hover, and write both to a JSON file.
-- Configured the way editors/README.md tells users to (vim.lsp.config/enable on 0.11,
-- vim.lsp.start on 0.9/0.10).
-- Environment: MEMLINT_CMD (JSON list: the server command), MEMLINT_FILE (file to open),
-- MEMLINT_OUT (where to write), MEMLINT_HOVER ("line,col" 0-based, optional).

local cmd = vim.json.decode(vim.env.MEMLINT_CMD)
local file = vim.env.MEMLINT_FILE
local out = vim.env.MEMLINT_OUT
local result = { version = tostring(vim.version()), diagnostics = {}, hover = vim.NIL, clients = 0 }

local function finish()
  local handle = assert(io.open(out, "w"))
  handle:write(vim.json.encode(result))
  handle:close()
  vim.cmd("qall!")
end

vim.cmd("filetype on")
local root_markers = { "memlint.toml", "pyproject.toml", ".git" }
if vim.fn.has("nvim-0.11") == 1 then
  vim.lsp.config("memlint", {
    cmd = cmd,
    filetypes = { "python", "json", "yaml" },
    root_markers = root_markers,
    settings = { memlint = { run = "onType" } },
  })
  vim.lsp.enable("memlint")
else
  vim.api.nvim_create_autocmd("FileType", {
    pattern = { "python", "json", "yaml" },
    callback = function(event)
      vim.lsp.start({
        name = "memlint",
        cmd = cmd,
        root_dir = vim.fs.dirname(vim.fs.find(root_markers, { upward = true, path = vim.api.nvim_buf_get_name(event.buf) })[1]),
        settings = { memlint = { run = "onType" } },
      })
    end,
  })
end

vim.cmd.edit(file)
local buffer = vim.api.nvim_get_current_buf()
local ok = vim.wait(60000, function() return #vim.diagnostic.get(buffer) > 0 end, 50)
result.clients = #vim.lsp.get_clients({ bufnr = buffer })
if not ok then
  result.error = "no diagnostics within 60 s"
  return finish()
end
vim.wait(500) -- a second (pushed and pulled) copy would arrive by now
for _, d in ipairs(vim.diagnostic.get(buffer)) do
  table.insert(result.diagnostics, {
    lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
    code = d.code, source = d.source, message = d.message, severity = d.severity,
  })
end
if vim.env.MEMLINT_HOVER then
  local line, col = vim.env.MEMLINT_HOVER:match("(%d+),(%d+)")
  local params = { textDocument = { uri = vim.uri_from_bufnr(buffer) }, position = { line = tonumber(line), character = tonumber(col) } }
  local responses = vim.lsp.buf_request_sync(buffer, "textDocument/hover", params, 30000) or {}
  for _, response in pairs(responses) do
    if response.result and response.result.contents then
      result.hover = response.result.contents.value
    end
  end
end
finish()
