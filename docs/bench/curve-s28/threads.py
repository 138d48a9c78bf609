"""Steps of Qwen2.5-Coder-0.5B bf16 (batch-invariant, 1,900 cached rows, median of 8) when torch
runs on one thread or two (twenty-eighth session). MODE: main (all on the main thread), executor
(all on a ThreadPoolExecutor thread), both (main, then the executor, then main again), touch-small /
touch-big (main, one small / large op in a persistent executor thread, main again), touch-big-exit
(the large op in a thread that exits)::

    for m in main executor both touch-small touch-big touch-big-exit; do python docs/bench/curve-s28/threads.py $m; done
    OMP_WAIT_POLICY=PASSIVE python docs/bench/curve-s28/threads.py main
"""
import os, sys, time, threading, statistics, torch
sys.path.insert(0, os.getcwd())
from concurrent.futures import ThreadPoolExecutor
MODE = sys.argv[1]
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
def setup():
    global v, kv, first
    v = Verifier(load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False).model)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(200, 20000, (1900,), generator=g).tolist()
    kv = KVState(); first, _, _ = v.prefill(kv, prompt, reserve=256)
def work(tag):
    ts = {0: [], 3: []}
    for _ in range(8):
        for n in (0, 3):
            t0 = time.perf_counter(); v.step(kv, first, DraftTree.chain(list(range(300, 300 + n)), "p")); ts[n].append(time.perf_counter() - t0)
            kv.truncate(1900)
    print(f"{MODE:10s} {tag:16s} 1-row {1000*statistics.median(ts[0]):.1f} 4-row {1000*statistics.median(ts[3]):.1f}  threads in process {len(os.listdir('/proc/self/task'))}", flush=True)
ex = ThreadPoolExecutor(1)
if MODE == "main":
    setup(); work("main"); work("main")
elif MODE == "executor":
    ex.submit(setup).result(); ex.submit(work, "executor").result(); ex.submit(work, "executor").result()
elif MODE == "both":
    setup(); work("main"); ex.submit(work, "executor").result(); work("main again")
if MODE == "touch-small":
    setup(); work("main"); ex.submit(lambda: torch.ones(10).sum()).result(); work("main after")
if MODE == "touch-big":
    setup(); work("main"); ex.submit(lambda: torch.ones(4_000_000).sum()).result(); work("main after")
if MODE == "touch-big-exit":
    import threading as th
    setup(); work("main"); t = th.Thread(target=lambda: torch.ones(4_000_000).sum()); t.start(); t.join(); work("main after")
