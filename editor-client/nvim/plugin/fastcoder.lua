-- FastCoder for Neovim. Nothing starts until you call:
--   require("fastcoder").setup({ ... })
-- (see editor-client/README.md)
if vim.g.loaded_fastcoder then
  return
end
vim.g.loaded_fastcoder = 1
