"""Where a server start goes (forty-ninth session): the typing replay measured 16.5 s from
`fastcoder serve` to the model's "ready". This times, in one fresh process, the steps the
server's load runs in its order (the imports, then fastcoder.models.load_model's steps one
by one, the engine, and the server's warm-up), each wall time.

    python docs/bench/probes-s49/startup_phases.py [MODEL]
"""
import sys
import time

T0 = time.perf_counter()
marks = []


def mark(name):
    marks.append((name, time.perf_counter()))


import torch  # noqa: E402

mark("import torch")
import transformers  # noqa: E402,F401

mark("import transformers")
from lsp_server.server import make_server  # noqa: E402,F401

mark("import lsp_server.server (pygls, fastcoder, indexer)")
from transformers import AutoModelForCausalLM  # noqa: E402

from fastcoder.engine import Engine  # noqa: E402
from fastcoder.models.load import _cpu_matmul, _tokenizer_from, resolve_dtype, resolve_device  # noqa: E402
from fastcoder.models.resolve import resolve_model  # noqa: E402
from lsp_server.model_host import _warm_up  # noqa: E402

mark("import the rest")
spec = sys.argv[1] if len(sys.argv) > 1 else "qwen2.5-coder-0.5b"
path = resolve_model(spec, progress=False)
dev = resolve_device("auto")
dt = resolve_dtype("auto", dev)
mark("resolve the model")
mm = _cpu_matmul(path, dev, "auto", dt, "auto")
dt = getattr(torch, mm["dtype"]) if mm else dt
mark(f"matmul choice ({mm and mm['why']})")
tok = _tokenizer_from(path)
mark("tokenizer")
model = AutoModelForCausalLM.from_pretrained(path, dtype=dt, attn_implementation="sdpa").to(dev).eval()
mark("from_pretrained")
if mm and mm["packed"]:
    from fastcoder.matmul import pack_linears

    pack_linears(model)
    mark("pack_linears")
from fastcoder.tokens import TokenInfo, plain_twin  # noqa: E402

plain_twin(tok)
mark("plain_twin")


from fastcoder.models.load import LoadedModel, detect_fim, tokenizer_fingerprint  # noqa: E402

loaded = LoadedModel(model=model, tokenizer=tok, device=dev, dtype=dt, name=spec, path=path,
                     fingerprint=tokenizer_fingerprint(tok), fim=detect_fim(tok), matmul=mm)
mark("fingerprint, fim")
engine = Engine.from_loaded(loaded, explicit_attention=False)
mark("Engine.from_loaded")
engine.defer_cost_curve()
mark("defer_cost_curve (cached curve?)")
TokenInfo.for_tokenizer(engine.tokenizer)
mark("TokenInfo")
_warm_up(engine)
mark("_warm_up (two tiny generations)")
prev = T0
for name, t in marks:
    print(f"{t - prev:7.2f} s  {name}")
    prev = t
print(f"{prev - T0:7.2f} s  total; curve state {engine.curve_state()}")
