"""The model and the one thread that runs it.

The model is not thread-safe, so every use of it (loading, generations of every
request kind) runs on one single-thread executor, in submission order. Loading
happens there too, in the background: ``initialize`` answers at once, and requests
that arrive while the model loads find ``ready`` false and get an empty answer.

Memory: every prefill and verification step allocates and frees tensors of varying
sizes (activations, KV copies), from several threads. glibc keeps freed memory in
per-thread arenas, so the server's RSS crept up with the requests it served although
nothing held the memory. The host limits glibc to :data:`MALLOC_ARENAS` arenas and
returns free memory to the system (``malloc_trim``) when the model thread falls idle,
at most once per :data:`TRIM_EVERY_S` seconds (no-ops without glibc).

One thread runs torch: every torch call, not only the model's, belongs on the model thread.
Each thread that runs a parallel PyTorch op gets an OpenMP team of its own that lives as long as
the thread; with more OpenMP threads than CPUs libgomp stops spinning between parallel regions,
and every step, on either thread, gets slower: one ``torch.ones(4_000_000).sum()`` in another
persistent thread made later steps ~20-25% dearer (1 row 32.4 -> 40.2 ms at 1,900 cached rows,
2-vCPU AMD EPYC, Qwen2.5-Coder-0.5B bf16; ``docs/bench/curve-s28/threads.py``).

Garbage collection: the model, its tokenizer and the libraries behind them leave millions
of long-lived Python objects, and each full (generation 2) collection walked all of them:
180-290 ms per collection (measured with ``gc.callbacks`` in a served process), a dozen
while the server started, and any one of them later stalls the request it falls in. A
load therefore runs with the collector paused, then collects once and freezes what is
alive (``gc.freeze``: later collections skip it); the next load unfreezes first, so a
replaced model's objects can be collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from fastcoder.engine import Engine

log = logging.getLogger(__name__)

StatusFn = Callable[[str, str], None]
CURVE_PENDING = "; measuring the draft cost curve while idle (plain AR until its first round)"
"""Said after the ready message while a first cost curve is measured (``Engine.defer_cost_curve``;
its first round prices trees once timed: ``CurveMeasurement.provisional``)."""
CURVE_AGAIN = "; measuring the draft cost curve again while idle (the cached one until then)"
"""Said after the ready message while a cached curve measured under load is measured again."""
MALLOC_ARENAS = 2
TRIM_EVERY_S = 1.0
_M_ARENA_MAX = -8  # glibc mallopt parameter


@contextlib.contextmanager
def _collector_paused():
    """No garbage collection while a model loads; what an earlier load froze (``gc.freeze``)
    can be collected again."""
    gc.unfreeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


_LIBC = _glibc()


def limit_malloc_arenas(n: int = MALLOC_ARENAS) -> None:
    """Cap glibc's malloc arenas (call before threads start allocating)."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, n)


def release_free_memory() -> None:
    """Give glibc's free memory back to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class _Job:
    """A job for the model thread: run once, by the executor or by :meth:`ModelHost.run_waiting`."""

    __slots__ = ("label", "fn", "args", "future", "taken", "owner")

    def __init__(self, label: str, fn: Callable[..., Any], args: tuple, owner: str = "") -> None:
        self.label, self.fn, self.args, self.owner = label, fn, args, owner
        self.future: Future = Future()
        self.taken = False


class ModelHost:
    def __init__(self, on_status: StatusFn, on_loaded: Callable[[Any], None],
                 quiet: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        """``quiet``: whether nothing else in the process takes the CPU now (the workspace
        index is not being built): a deferred cost curve is measured only then (its steps
        are timed), and :meth:`measure_when_idle` is called when it becomes so."""
        limit_malloc_arenas()
        self._quiet = quiet
        self.curve_error: str | None = None  # the deferred cost curve's measurement failed (then AR)
        self._trimmed = 0.0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastcoder-model")
        self._on_status = on_status
        self._on_loaded = on_loaded
        self._load_seq = 0
        self.state = "idle"  # idle | loading | ready | error
        self.message = "no model loaded yet"
        self.loaded: Any = None  # fastcoder.models.LoadedModel
        self.engine: Engine | None = None
        self.load_epoch = 0  # bumped at every successful load (work queued before a reload is dropped)
        self.load_s: float | None = None
        self.busy: tuple[str, float] | None = None  # the job running in the model thread
        self._queued = 0
        self._queue_lock = threading.Lock()
        self._background: set[threading.Event] = set()  # cancel events of background jobs
        self._interleavable: deque[_Job] = deque()  # queued jobs run_waiting may run early
        self._pending: set[_Job] = set()  # every queued job (cancelled at close)
        self._nested = False  # run_waiting is running one

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self.engine is not None

    # ------------------------------------------------------------------ loading
    def load(self, spec: str, dtype: str, device: str, pack: str = "auto", explicit: str = "off") -> Future:
        """Load ``spec`` in the model thread (after whatever runs there now). A newer
        load request makes an older queued one a no-op."""
        self._load_seq += 1
        seq = self._load_seq
        self.state = "loading"
        self.message = f"loading {spec} ({dtype}, {device})"
        self._on_status("loading", self.message)
        return self._executor.submit(self._load, seq, spec, dtype, device, pack, explicit)

    def _load(self, seq: int, spec: str, dtype: str, device: str, pack: str = "auto", explicit: str = "off") -> None:
        if seq != self._load_seq:
            return
        from fastcoder.models import load_model

        t0 = time.perf_counter()
        old = self.engine
        self.engine = None
        self.loaded = None
        if old is not None:
            old.close()
        with _collector_paused():
            try:
                loaded = load_model(spec, dtype=dtype, device=device, pack=pack, progress=False)
                engine = Engine.from_loaded(loaded, explicit_attention=None if explicit == "auto" else False)
                # the cost curve: cached once per model, device, dtype and machine. Not cached
                # yet on a CPU: measured in the model thread's idle time after the model is
                # ready (plain AR until its first round), not before the first answer (~30 s); on CUDA
                # now (its steps take milliseconds)
                if loaded.device.type != "cpu" or not engine.defer_cost_curve():
                    self._on_status("loading", f"measuring verification cost of {spec}")
                    engine.cost_curve()
                _warm_up(engine)
            except Exception as exc:  # a missing model, no network, bad dtype, ...
                log.exception("loading %s failed", spec)
                if seq == self._load_seq:
                    self.state = "error"
                    self.message = f"could not load model {spec}: {exc}"
                    self._on_status("error", self.message)
                return
        if seq != self._load_seq:  # superseded while loading
            engine.close()
            return
        gc.collect()
        gc.freeze()  # the model's objects: out of later full collections' way
        self.curve_error = None
        self.loaded, self.engine = loaded, engine
        self.load_epoch += 1
        self.load_s = time.perf_counter() - t0
        self.state = "ready"
        dtype_name = str(loaded.dtype).removeprefix("torch.")
        self.message = f"{spec} on {loaded.device} ({dtype_name}), loaded in {self.load_s:.1f} s"
        state = engine.curve_state()
        if state["state"] == "measuring":
            self.message += CURVE_AGAIN if state.get("meanwhile") == "cache" else CURVE_PENDING
        log.info("model ready: %s", self.message)
        self._on_loaded(loaded)
        self.measure_when_idle()

    # ------------------------------------------------------------------ running
    def submit(
        self, fn: Callable[..., Any], *args: Any, label: str = "", background: bool = False,
        cancel: threading.Event | None = None, interleave: bool = False, owner: str = "",
    ) -> "asyncio.Future[Any]":  # fmt: skip
        """Run ``fn(*args)`` in the model thread; an awaitable for its result.
        ``label`` names the job in :meth:`describe` while it runs.

        Background jobs (``background``, with their ``cancel`` event) have the lowest
        priority: every foreground job submitted sets the cancel event of every
        background job queued or running, so it stops within a prefill chunk or one
        forward pass. ``interleave``: a long job that calls :meth:`run_waiting` between
        its steps (a function body) runs this one there instead of after it (a
        completion); ``owner``: the document it is for (see :meth:`run_waiting`)."""
        job = _Job(label or getattr(fn, "__name__", "job"), fn, args, owner)
        with self._queue_lock:
            self._queued += 1
            if background and cancel is not None:
                self._background.add(cancel)
            if interleave:
                self._interleavable.append(job)
            self._pending.add(job)
        if not background:
            self.preempt_background()
        self._executor.submit(self._take, job)
        return asyncio.wrap_future(job.future)

    def run_waiting(self, exclude: str | None = None) -> float:
        """Model thread, between two steps of a long job: run the interleavable jobs that
        were queued meanwhile (completions) now, inside it, instead of after it (a
        function body of 15 s held every completion for as long), but not those whose
        ``owner`` is ``exclude`` (the running job's own document: they wait for it, or
        stop it). Their KV caches are their documents' own (on CUDA the verifier's work
        area parks and gives back the long job's rows). Returns the seconds they took;
        none run inside one of them."""
        if self._nested:
            return 0.0
        t0 = time.perf_counter()
        outer = self.busy
        self._nested = True
        try:
            while True:
                with self._queue_lock:
                    job = next((j for j in self._interleavable if not j.taken and (exclude is None or j.owner != exclude)), None)
                    if job is None:
                        break
                    self._interleavable.remove(job)
                    job.taken = True
                    self._queued -= 1
                    self._pending.discard(job)
                self._execute(job)
        finally:
            self._nested = False
            self.busy = outer
        return time.perf_counter() - t0

    def preempt_background(self) -> None:
        """A foreground job is coming (a request waits out its debounce): background jobs
        stop now, so their last forward ends before it is submitted."""
        with self._queue_lock:
            for event in self._background:
                event.set()
            self._background.clear()

    def promote(self, cancel: threading.Event) -> None:
        """A background job is now awaited by a request: foreground jobs no longer cancel it."""
        with self._queue_lock:
            self._background.discard(cancel)

    def waiting(self) -> int:
        """Jobs queued behind the one that runs (background work gives way to them)."""
        return self._queued

    def awaited(self) -> bool:
        """Another job waits for the model thread: with ``engine.interruptSteps`` a
        cancelled generation's step then stops between its layers
        (``Engine.generate(preempt=...)``); with nobody waiting it ends and its tokens
        reach the document's CACHE."""
        return self._queued > 0

    def _take(self, job: "_Job") -> None:
        """The executor reached ``job``: run it unless :meth:`run_waiting` already did."""
        with self._queue_lock:
            if job.taken:
                return
            job.taken = True
            self._queued -= 1
            self._pending.discard(job)
            with contextlib.suppress(ValueError):
                self._interleavable.remove(job)
        self._execute(job)
        if self._queued == 0:
            self.measure_when_idle()
        now = time.monotonic()
        if self._queued == 0 and now - self._trimmed >= TRIM_EVERY_S:
            self._trimmed = now
            # as the next job in this thread: after this one's answer is out (a trim
            # costs ~0.75 ms with the 0.5B model loaded, 2-vCPU EPYC, and ran before it)
            try:
                self._executor.submit(self._trim_if_idle)
            except RuntimeError:  # shut down
                pass

    def _execute(self, job: "_Job") -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        self.busy = (job.label, time.monotonic())
        try:
            result = job.fn(*job.args)
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting side)
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
        finally:
            self.busy = None

    def measure_when_idle(self) -> None:
        """Run the engine's deferred cost-curve measurement next in the model thread, when
        there is one (``Engine.defer_cost_curve``) and the process is quiet: it goes on
        between jobs, a unit at a time, and gives way as soon as a job is queued or the
        process is busy otherwise (the index being built)."""
        engine = self.engine
        if engine is None or engine.curve_state()["state"] != "measuring" or self.curve_error or not self._quiet():
            return
        try:
            self._executor.submit(self._measure_if_idle, engine, self._load_seq)
        except RuntimeError:  # shut down
            pass

    def _measure_if_idle(self, engine: Engine, seq: int) -> None:
        if engine is not self.engine or seq != self._load_seq or self._queued or not self._quiet():
            return  # replaced, closing, a job waits (it schedules the rest when done), or not quiet
        if engine.curve_state()["state"] != "measuring":
            return  # done by a run submitted before this one
        self.busy = ("measuring the draft cost curve (idle time)", time.monotonic())
        try:
            done = engine.measure_some(stop=lambda: self._queued > 0 or seq != self._load_seq or not self._quiet())
        except Exception as exc:  # noqa: BLE001 (drafting stays off: plain AR, the same tokens)
            log.exception("measuring the cost curve failed; generations run as plain AR (or by its first round, if timed)")
            self.curve_error = f"{type(exc).__name__}: {exc}"  # not tried again until a reload
            return
        finally:
            self.busy = None
        if done and engine is self.engine:
            log.info("cost curve measured: %s", engine.curve_state())
            for note in (CURVE_PENDING, CURVE_AGAIN):
                if self.message.endswith(note):
                    self.message = self.message.removesuffix(note)
                    self._on_status("ready", self.message)

    def _trim_if_idle(self) -> None:
        """Give glibc's free memory back unless a job came in meanwhile (then later)."""
        if self._queued == 0:
            release_free_memory()
        else:
            self._trimmed = 0.0

    async def run(self, fn: Callable[..., Any], cancel: threading.Event, label: str = "") -> Any:
        """Await ``fn()`` in the model thread. When the awaiting task is cancelled
        (``$/cancelRequest``), ``cancel`` is set so the engine stops within one
        forward pass (or the job is skipped if it has not started), and the
        cancellation propagates (pygls then answers RequestCancelled)."""
        fut = self.submit(fn, label=label)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "message": self.message}
        busy = self.busy
        out["busy"] = None if busy is None else {"task": busy[0], "seconds": time.monotonic() - busy[1]}
        out["queued"] = self.waiting()  # jobs waiting for the model thread
        if self.loaded is not None:
            out.update(
                name=self.loaded.name,
                path=str(self.loaded.path),
                device=str(self.loaded.device),
                dtype=str(self.loaded.dtype).removeprefix("torch."),
                fim=self.loaded.fim is not None,
                loadSeconds=self.load_s,
                # CPU: packed linear weights or plain, and the probe it was chosen by
                matmul=self.loaded.matmul and {k: self.loaded.matmul.get(k) for k in ("packed", "fused", "why")},
            )
        engine = self.engine
        if engine is not None:
            out["steps"] = engine.verifier.graph_status()  # CUDA graphs or eager, failed captures
            out["costCurve"] = engine.curve_state()  # cached, measured, or measuring in idle time
            if self.curve_error:
                out["costCurve"]["error"] = self.curve_error
            # what the timed steps cost against the cost curve: 1-row steps, a tree's extra
            # rows (learned only where engine.stepCalibration is on)
            out["stepCalibration"] = engine.calibration.to_json()
        return out

    def close(self) -> None:
        self._load_seq += 1
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._queue_lock:
            pending, self._pending = self._pending, set()
        for job in pending:
            job.future.cancel()
        if self.engine is not None:
            self.engine.close()


def _warm_up(engine: Engine) -> None:
    """What the first real request would otherwise pay for, while the model loads: the
    tokenizer's per-token table (anchored prompts, skip tokens and line-end pruning read
    it; ~0.8 s for a 151k vocabulary on a 2-vCPU EPYC, which was most of the first
    request's 1.1 s of setup in the typing replay) and one tiny generation of each kind
    (AR, and FastCoder drafting from the prompt and an empty session)."""
    from fastcoder.config import DecodeConfig
    from fastcoder.tokens import TokenInfo

    TokenInfo.for_tokenizer(engine.tokenizer)
    ids = engine.encode("def hello():\n    return hello()\n\ndef hello():\n    return")[:32] or [0]
    engine.generate(ids, DecodeConfig(method="ar", max_new_tokens=2))
    engine.generate(ids, DecodeConfig(method="fastcoder", max_new_tokens=4))
