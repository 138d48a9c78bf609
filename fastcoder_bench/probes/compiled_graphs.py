"""Would a ``torch.compile``d forward inside the CUDA graphs make the verify step cheaper?

    python -m fastcoder_bench.probes.compiled_graphs [--model qwen2.5-coder-0.5b] [--buckets 1,4,16]
        [--capacity 2048] [--context 1500] [--rounds 20] [--mode default]

On the H200 (forty-third session) FastCoder's step was 6.1 ms, 4.4 of them the forward: a
CUDA graph of transformers' unfused eager kernels, about twice the 2.1 ms a
``torch.compile(mode="reduce-overhead")`` forward took on that kind of machine. This probe
measures the difference on the verifier's own step before the product changes: two
verifiers over the same model, one capturing its graphs as it does today, one capturing
the inductor-compiled forward (:meth:`Verifier._forward` through ``torch.compile``, one
static shape per (bucket, width); the graphs keep the device-side mask, the fixed work
area and the one copy each way). It prints the compile + capture time per shape, each
bucket's step time on both (alternating, one process: :func:`interleaved_ms`) at
``--context`` cached rows, and whether the compiled step's greedy choices equal the eager
step's (inductor's fused kernels round otherwise, so logits differ by bf16 ulps; the
argmax agreement and the largest logit difference are reported, not asserted).

Without CUDA (a smoke run of the probe itself) the second verifier runs the existing
``compile=`` path instead of graphs: the same compiled function, no capture.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms


class CompiledGraphVerifier(Verifier):
    """:class:`Verifier` whose CUDA graphs capture the compiled forward (probe only);
    ``mode``: ``torch.compile``'s (None: its default)."""

    def __init__(self, model: torch.nn.Module, *, mode: str | None = None, **kw) -> None:
        self.mode = mode  # (before the base class captures its graphs)
        self._compiled_fn = None
        self.shape_s: dict[tuple[int, int], float] = {}
        super().__init__(model, **kw)

    def _capture(self, cache, b, w, pool) -> None:
        if self._compiled_fn is None:
            # one static shape per (bucket, width): raise dynamo's recompile limit past them
            cfg = torch._dynamo.config
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(cfg, name):
                    setattr(cfg, name, max(getattr(cfg, name), 256))
            self._compiled_fn = torch.compile(Verifier._forward, dynamic=False, mode=self.mode)
        t0 = time.perf_counter()
        self._forward = lambda *a, **k: self._compiled_fn(self, *a, **k)  # what _capture runs
        try:
            super()._capture(cache, b, w, pool)
        finally:
            del self._forward
        torch.cuda.synchronize()
        self.shape_s[(b, w)] = time.perf_counter() - t0
        print(f"  compiled and captured {b}@{w} in {self.shape_s[(b, w)]:.1f} s", flush=True)  # (a timeout keeps these)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--buckets", default="1,4,16")
    ap.add_argument("--capacity", type=int, default=2048, help="work area rows (graph widths 1024 doubling up to it)")
    ap.add_argument("--context", type=int, default=1500, help="cached rows the timed steps attend")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--mode", default="default", help="torch.compile mode (default, max-autotune-no-cudagraphs)")
    args = ap.parse_args()
    buckets = tuple(int(b) for b in args.buckets.split(","))
    cuda = torch.cuda.is_available()
    loaded = load_model(args.model, dtype="bfloat16" if cuda else "float32", device="cuda" if cuda else "cpu",
                        pack="off", progress=False)  # (packed oneDNN weights do not compile)
    model = loaded.model
    name = torch.cuda.get_device_name() if cuda else "cpu (smoke run: compile without graphs)"
    print(f"{args.model} on {name}, torch {torch.__version__}, buckets {buckets}, capacity {args.capacity}", flush=True)
    t0 = time.perf_counter()
    if cuda:
        eager = Verifier(model, buckets=buckets, graph_capacity=args.capacity)
    else:  # the fixed shapes graphs would run, eagerly
        eager = Verifier(model, buckets=buckets, invariant=False)
        eager._run_step = lambda cache, b, past, real=None: eager._forward(cache, b, cache.capacity, True)
        eager.padded = True
    print(f"eager graphs: {time.perf_counter() - t0:.1f} s, {eager.graph_status()}", flush=True)
    t0 = time.perf_counter()
    if cuda:
        comp = CompiledGraphVerifier(model, mode=None if args.mode == "default" else args.mode, buckets=buckets,
                                     graph_capacity=args.capacity)  # fmt: skip
        per = ", ".join(f"{b}@{w} {s:.1f} s" for (b, w), s in sorted(comp.shape_s.items()))
        print(f"compiled graphs: {time.perf_counter() - t0:.1f} s ({per}); {comp.graph_status()}", flush=True)
    else:
        comp = Verifier(model, buckets=buckets, compile="inductor")
    g = torch.Generator().manual_seed(0)
    vocab = int(model.config.vocab_size)
    prompt = torch.randint(100, vocab - 100, (args.context,), generator=g).tolist()
    kvs = {"eager": KVState(), "compiled": KVState()}
    roots = {"eager": eager.prefill(kvs["eager"], prompt, reserve=256)[0],
             "compiled": comp.prefill(kvs["compiled"], prompt, reserve=256)[0]}  # fmt: skip
    print(f"prefill {args.context} tokens: first token {roots}", flush=True)
    verifiers = {"eager": eager, "compiled": comp}
    agree = total = 0
    max_diff = 0.0
    for b in buckets:
        tree = DraftTree.chain(prompt[10 : 10 + b - 1], "probe")

        def stepper(key: str):
            v, kv = verifiers[key], kvs[key]

            def run() -> None:
                v.step(kv, roots["eager"], tree)
                if cuda:
                    torch.cuda.synchronize()
                kv.truncate(args.context)

            return run

        t0 = time.perf_counter()
        times = interleaved_ms({k: stepper(k) for k in verifiers}, args.rounds, warmup=2)
        first_s = time.perf_counter() - t0
        for key in verifiers:
            verifiers[key].step(kvs[key], roots["eager"], tree)
        le, lc = eager.last_logits.float(), comp.last_logits.float()
        for key in verifiers:
            kvs[key].truncate(args.context)
        agree += int((le.argmax(-1) == lc.argmax(-1)).sum())
        total += le.shape[0]
        max_diff = max(max_diff, float((le - lc).abs().max()))
        e, c = statistics.median(times["eager"]), statistics.median(times["compiled"])
        print(f"bucket {b:3d}: eager graphs {e:7.2f} ms, compiled {c:7.2f} ms ({e / c:.2f}x); min {min(times['eager']):.2f} / "
              f"{min(times['compiled']):.2f}; {first_s:.1f} s with the warm-up", flush=True)  # fmt: skip
    print(f"greedy choices equal on {agree} of {total} rows; largest logit difference {max_diff:.4f}; "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
