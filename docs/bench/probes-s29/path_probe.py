"""Twenty-ninth session: what Qwen2.5-Coder-0.5B writes into an empty or one-line file, bare FIM prompt
against the prompt with `<|file_sep|>path` (and `<|repo_name|>`) before it::

    python docs/bench/probes-s29/path_probe.py
"""
import torch
from fastcoder.models import load_model
lm = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
m, tok = lm.model, lm.tokenizer
def gen(prompt, n=24):
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.inference_mode():
        out = m.generate(ids, max_new_tokens=n, do_sample=False)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=False)
cases = [("scratch6.py", "", ""), ("utils.ts", "", ""), ("main.go", "", ""), ("test_shapes.py", "import pytest\n", ""),
         ("server.rs", "use std::", ""), ("Makefile", "", ""), ("build.sh", "#!", "")]
for path, prefix, suffix in cases:
    bare = f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"
    fsep = f"<|file_sep|>{path}\n" + bare
    repo = f"<|repo_name|>ws\n<|file_sep|>{path}\n" + bare
    for name, p in (("bare", bare), ("file_sep", fsep), ("repo+file_sep", repo)):
        print(f"{path:15s} {name:14s} {gen(p)!r}")
