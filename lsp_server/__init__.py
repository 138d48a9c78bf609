"""FastCoder language server (pygls): AI code completion with lossless speculative decoding.

Read :mod:`lsp_server.server` first: it registers every feature, top to bottom.
"""
