"""FastCoder: lossless retrieval-based speculative decoding for code completion.

The engine knows nothing about LSP, editors or file systems.
"""

__version__ = "0.1.0"
