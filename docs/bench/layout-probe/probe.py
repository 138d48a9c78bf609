"""Quick sanity: anchored+healing vs psm on a few positions of a real file, qwen 0.5B."""
import glob, random, time, sys, ast
import torch
from fastcoder.models import load_model
from fastcoder.engine import Engine
from fastcoder.config import DecodeConfig
from fastcoder.tokens import TokenInfo
from fastcoder.session import Session
from lsp_server.prompt import build_prompt, CursorContext
loaded = load_model("qwen2.5-coder-0.5b", dtype=sys.argv[1] if len(sys.argv) > 1 else "bfloat16", device="cpu", progress=False)
eng = Engine.from_loaded(loaded); tok = eng.tokenizer; info = TokenInfo.for_tokenizer(tok)
files = sorted(glob.glob('/root/.cache/fastcoder/bench/src/*/**/*.py', recursive=True))
print(len(files))
rng = random.Random(1)
res = {"psm": 0, "anchored": 0}; n = 0
for f in rng.sample(files, 40):
    text = open(f).read()
    try: tree = ast.parse(text)
    except Exception: continue
    fns = [x for x in ast.walk(tree) if isinstance(x, ast.FunctionDef) and x.end_lineno - x.lineno > 3]
    if not fns: continue
    fn = rng.choice(fns); lines = text.split("\n")
    ln = rng.randint(fn.lineno, fn.end_lineno - 1)  # 0-based line index of a body line
    line = lines[ln]
    if not line.strip(): continue
    ind = len(line) - len(line.lstrip())
    col = rng.randint(ind, len(line) - 1)
    start = sum(len(l) + 1 for l in lines[:ln])
    prefix = text[:start + col]; suffix = "\n" + "\n".join(lines[ln + 1:])
    target = line[col:]
    ctx = CursorContext(prefix, suffix)
    outs = {}
    for layout in ("psm", "anchored"):
        p = build_prompt(tok, loaded.fim, ctx, 1024, max_suffix_tokens=128, layout=layout, info=info)
        g = eng.generate(p.ids, DecodeConfig(method="ar", max_new_tokens=24), first_allowed=p.allowed, stop_fn=lambda t, h=len(p.heal): (t.find("\n", h) if t.find("\n", h) >= 0 else None))
        out = g.text[len(p.heal):].split("\n")[0]
        outs[layout] = out
        res[layout] += out.rstrip() == target.rstrip()
    n += 1
    print(f"{n:3d} target={target!r:40.40} psm={outs['psm']!r:40.40} anch={outs['anchored']!r:40.40}")
    if n >= 25: break
print(res, n)
