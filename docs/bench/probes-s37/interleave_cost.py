"""Thirty-seventh session: does running completions between a function body's steps slow the body
itself? In one process (qwen2.5-coder-0.5b, dtype auto, the server's default settings): the
body of a `parse_args` stub generated alone and with three completion generations (another
document's session) run inside it at its 3rd, 15th and 30th step, three times each, alternating::

    python docs/bench/probes-s37/interleave_cost.py
"""
import time

from fastcoder.models import load_model
from fastcoder.engine import Engine
from fastcoder.session import Session
from fastcoder.config import DecodeConfig
from lsp_server.settings import ServerSettings
from lsp_server import actions
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", progress=False)
engine = Engine.from_loaded(loaded)
engine.cost_curve()
settings = ServerSettings()
text = "import argparse\n\n\ndef parse_args(argv=None):\n    \"\"\"Options: --verbose, --output FILE, --jobs N (default 4), --dry-run, and one or more input paths.\"\"\"\n"
stub = actions.find_stub(text, 3, "python")
other = engine.encode("import os\n\n\ndef list_python_files(root):\n    out = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n            if not")
osess = Session(settings.engine)
engine.generate(other, DecodeConfig(method="fastcoder", max_new_tokens=16), session=osess)
def run(mode):
    n = [0]
    def between(_c, stats):
        n[0] += 1
        if mode == "interleave" and n[0] in (3, 15, 30):
            t0 = time.perf_counter()
            engine.generate(other + engine.encode(" x" * n[0]), DecodeConfig(method="fastcoder", max_new_tokens=16), session=osess)
            stats.yielded_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    body, gen = actions.generate_body(engine, loaded.fim, text, stub, settings, on_step=between, language="python")
    st = gen.stats
    print(f"{mode:10s} wall {time.perf_counter()-t0:5.2f} s decode {st.decode_s:5.2f} yielded {st.yielded_s:4.2f} steps {st.forward_steps} tokens {st.new_tokens} ms/step {1e3*st.decode_s/max(1,st.forward_steps):5.1f} lines {len(body.splitlines())}", flush=True)
for mode in ["alone", "interleave", "alone", "interleave", "alone", "interleave"]:
    run(mode)
