import random, re
from pathlib import Path
from indexer.tokenizing import load_tokenizer
from fastcoder.tokens import TokenInfo
from lsp_server.prompt import heal_split
from fastcoder_bench.quality.tasks import Project, python_files
from fastcoder_bench.suite.projects import fetch_project, load_projects
tok = load_tokenizer("qwen2.5-coder-0.5b", progress=False); info = TokenInfo.for_tokenizer(tok)
NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]{3,}")
pinned, _ = load_projects(None)
n = diff = 0; ex = []
for p in pinned[:4]:
    pr = Project(Path(fetch_project(p)), p.name); rng = random.Random(f"all:{pr.name}")
    for rel in python_files(pr.root)[:60]:
        for ln in (pr.root / rel).read_text(encoding="utf-8", errors="replace").split("\n"):
            if not ln.startswith("    "): continue
            for m in NAME.finditer(ln):
                cut = m.start() + rng.randint(1, len(m.group()) - 1)
                typed = ln[:cut]
                a, b = heal_split(tok, typed), heal_split(tok, typed, info)
                n += 1
                if a != b:
                    diff += 1
                    if len(ex) < 12 and rng.random() < 0.05: ex.append((typed.strip()[-30:], a[1], b[1]))
print(f"{n} cut points inside names (4 projects, 60 files each): the heal differs at {diff} ({100*diff/n:.1f}%)")
for e in ex: print("  ", e)
