"""Twenty-ninth session: new-file completions, the first line of real files typed and the next line
predicted (suffix empty), with and without the workspace name and the file's path in the repository
format (`fileHeader`), Qwen2.5-Coder-0.5B bf16, greedy; N files per language::

    python docs/bench/probes-s29/file_start.py [N_FILES [K_LINES [LANG,LANG]]]   # 12 1 all

K: how many non-empty lines are typed before the cursor.
"""
import glob, os, sys, json, difflib, torch
from fastcoder.models import load_model
lm = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
m, tok = lm.model, lm.tokenizer
SP = "/work/main/.venv/lib/python3.11/site-packages"
SRC = os.path.expanduser("~/.cache/fastcoder/bench/src")
pools = {
    "python": sorted(glob.glob(f"{SRC}/*/**/*.py", recursive=True)),
    "javascript": sorted(glob.glob("/usr/lib/node_modules/npm/node_modules/**/*.js", recursive=True)),
    "c/c++": sorted(glob.glob(f"{SP}/torch/include/ATen/native/**/*.h", recursive=True)),
    "markdown": sorted(glob.glob(f"{SRC}/*/**/*.md", recursive=True)),
    "html": sorted(glob.glob(f"{SRC}/*/**/*.html", recursive=True)),
    "toml/yaml": sorted(glob.glob(f"{SRC}/*/**/*.toml", recursive=True) + glob.glob(f"{SRC}/*/**/*.yml", recursive=True)),
    "lua": sorted(glob.glob("/work/main/editor-client/nvim/**/*.lua", recursive=True)),
}
N = int(sys.argv[1]) if len(sys.argv) > 1 else 12
K = int(sys.argv[2]) if len(sys.argv) > 2 else 1
LANGS = sys.argv[3].split(",") if len(sys.argv) > 3 else None
def pick(files, n):
    files = [f for f in files if 300 < os.path.getsize(f) < 200_000]
    step = max(1, len(files) // n)
    return files[::step][:n]
def gen(prompt):
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.inference_mode():
        out = m.generate(ids, max_new_tokens=32, do_sample=False)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
def next_line(text):
    lines = [l for l in text.split("\n")]
    # first line with content
    for l in lines:
        if l.strip():
            return l.strip()
    return ""
res = {}
for lang, files in pools.items():
    if LANGS and lang not in LANGS:
        continue
    for f in pick(files, N):
        text = open(f, encoding="utf-8", errors="replace").read()
        lines = text.split("\n")
        nz = [i for i, l in enumerate(lines) if l.strip()]
        if len(nz) < K + 2:
            continue
        cut = nz[K - 1] + 1 if K else 0  # the first K non-empty lines typed, cursor at the start of the next line
        prefix = "\n".join(lines[:cut]) + "\n" if K else ""
        target = lines[nz[K]].strip()
        bare = f"<|fim_prefix|>{prefix}<|fim_suffix|><|fim_middle|>"
        head = f"<|repo_name|>{os.path.basename(os.path.dirname(f))}\n<|file_sep|>{os.path.basename(f)}\n" + bare
        for name, p in (("bare", bare), ("header", head)):
            pred = next_line(gen(p))
            r = res.setdefault(lang, {}).setdefault(name, [0, 0.0, 0])
            r[0] += pred == target; r[1] += difflib.SequenceMatcher(None, pred, target).ratio(); r[2] += 1
tot = {}
for lang, d in res.items():
    line = f"{lang:12s}"
    for name in ("bare", "header"):
        em, es, n = d[name]
        t = tot.setdefault(name, [0, 0.0, 0]); t[0] += em; t[1] += es; t[2] += n
        line += f"  {name}: EM {em}/{n} ES {es/n:.3f}"
    print(line, flush=True)
for name, (em, es, n) in tot.items():
    print(f"all {name}: EM {em}/{n} = {em/n:.3f}, ES {es/n:.3f}")
