"""Engine: a loaded model + tokenizer, its verifier and cost curve, and a search pool.

The one entry point the CLI, the server and the benchmark call::

    engine = Engine(model, tokenizer)
    gen = engine.generate(prompt_ids, DecodeConfig(method="fastcoder"), sources=Sources(dr=..., dc=...))
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Collection, Sequence

from fastcoder.budget import CostCurve, CurveMeasurement, StepCalibration, load_cached, save_measured, usable_lengths
from fastcoder.config import DecodeConfig
from fastcoder.decode import Generation, StepCallback, generate
from fastcoder.drafters import Sources, make_drafter
from fastcoder.matmul import is_packed
from fastcoder.session import Session
from fastcoder.tokens import encode
from fastcoder.stops import StopLike
from fastcoder.verifier import PREFILL_CHUNK_CPU, PREFILL_CHUNKS_CPU, Verifier

log = logging.getLogger(__name__)


def _host(device) -> str:
    """What a cost curve was measured on, beyond the model and its settings: the CPU's
    name, the flags its kernels depend on and the torch threads (or the GPU's name), and
    torch's version. A curve cached on another kind of machine, or with another thread
    count, is not this one's (two machines of one name and flags still share it)."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        where = torch.cuda.get_device_name(device)
    else:
        from fastcoder.matmul import cpu_key

        where = f"{cpu_key()}|t{torch.get_num_threads()}"
    return f"{where}|torch{torch.__version__}"


class Engine:
    def __init__(self, model, tokenizer, *, name: str = "model", record_margins: bool = False,
                 explicit_attention: bool | None = False, path_attention: bool | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        # explicit_attention: None = where probed invariant and faster (Verifier), False = never (default)
        # path_attention: None = wherever the steps are batch-invariant (Verifier.paths), False = never
        self.verifier = Verifier(model, record_margins=record_margins, explicit_attention=explicit_attention,
                                 path_attention=path_attention)
        self.pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="fastcoder-search")
        self._curve: CostCurve | None = None
        self._curve_lock = threading.Lock()
        self._curve_source = ""  # "cache" | "measured" | "" (none yet)
        self._stale = False  # the cached curve is due to be measured again (budget.load_cached)
        self._measuring: CurveMeasurement | None = None  # deferred (defer_cost_curve), not done
        # the curve against the steps this process runs (DecodeConfig.step_calibration, off by default)
        self.calibration = StepCalibration()

    @classmethod
    def from_loaded(cls, loaded, **kw) -> "Engine":
        """From :class:`fastcoder.models.LoadedModel`."""
        return cls(loaded.model, loaded.tokenizer, name=loaded.name, **kw)

    @property
    def device(self):
        return self.verifier.device

    @property
    def dtype(self):
        return self.verifier.dtype

    def _curve_key(self) -> str:
        # everything that changes what a step costs: a curve measured with another
        # attention, graph mode, matmul path (packed weights) or step padding (batch-invariant) is not this one's
        attn = getattr(self.model.config, "_attn_implementation", None) or "?"
        packed = "|packed" if is_packed(self.model) else ""
        inv = "|invariant" if self.verifier.invariant else ""
        if self.verifier.explicit_from is not None:
            inv += f"|explicit>={self.verifier.explicit_from}"
        if getattr(self.verifier, "paths", False):
            inv += "|paths"
        return f"{self.name}|{self.device}|{self.dtype}|attn={attn}|graphs={self.verifier.use_graphs}{packed}{inv}|{_host(self.device)}"

    def cost_curve(self) -> CostCurve:
        """c(k) for this model, device and dtype: cached on disk, else measured now (a
        deferred measurement is finished now) and cached. A cached curve that is due to be
        measured again is measured now too, unless that measurement was deferred
        (:meth:`defer_cost_curve`): then it is the curve until the new one is done."""
        with self._curve_lock:
            self._read_cached()
            if self._curve is not None and (not self._stale or self._measuring is not None):
                return self._curve
            if self._measuring is None:
                log.info("measuring verification cost curve c(k) for %s", self._curve_key())
                self._measuring = CurveMeasurement(self.verifier, usable_lengths(self.verifier))
            self._measuring.run()
            self._measured(self._measuring)
            return self._curve

    def _measured(self, measurement: CurveMeasurement) -> None:
        """(Under ``_curve_lock``.) ``measurement`` is done: its curve cached and used from
        now on (the step calibration restarts against it, as :meth:`use_cost_curve`'s)."""
        self._curve, self._measuring, self._stale = save_measured(self._curve_key(), measurement), None, False
        self._curve_source = "measured"
        self.calibration = StepCalibration()
        self._curve_chosen()

    def _read_cached(self) -> CostCurve | None:
        """(Under ``_curve_lock``.) The curve, read from the disk cache the first time, unless
        a deferred measurement is under way."""
        if self._curve is None and self._measuring is None:
            self._curve, self._stale = load_cached(self._curve_key())
            self._curve_source = "cache" if self._curve is not None else ""
            if self._curve is not None:
                self._curve_chosen()
        return self._curve

    def _curve_chosen(self) -> None:
        """(Under ``_curve_lock``.) What else the machine's curve decides: the CPU's prefill
        chunk (:meth:`CostCurve.prefill_chunk`, :meth:`Verifier.set_prefill_chunk`), among
        the chunks the measurement times; a chunk set otherwise (a caller's own) stays."""
        if self.device.type == "cpu" and self._curve.prefill and self.verifier.prefill_chunk in PREFILL_CHUNKS_CPU:
            chunk = self.verifier.set_prefill_chunk(self._curve.prefill_chunk(PREFILL_CHUNK_CPU))
            log.info("prefill in %d-row chunks (%s ms a token by chunk rows)", chunk,
                     {n: round(1e3 * x, 2) for n, x in sorted(self._curve.prefill.items())})  # fmt: skip

    def cached_cost_curve(self) -> CostCurve | None:
        """The curve if it is loaded or cached on disk (never measures it; one due to be
        measured again too)."""
        with self._curve_lock:
            return self._read_cached()

    def defer_cost_curve(self) -> bool:
        """With no curve cached, or a cached one due to be measured again: measure it later,
        a unit at a time (:meth:`measure_some`, in the caller's idle time), instead of now
        (~20-30 s for Qwen2.5-Coder-0.5B on a 2-vCPU CPU). Until it is measured, a
        generation whose drafter needs the curve is priced by the old curve, else by the
        measurement's first round once it is timed at its first length
        (:meth:`CurveMeasurement.provisional`), else runs as plain AR (the same tokens;
        ``GenStats.curve_pending``). True when deferred."""
        with self._curve_lock:
            if self._read_cached() is not None and not self._stale:
                return False
            if self._measuring is None:
                self._measuring = CurveMeasurement(self.verifier, usable_lengths(self.verifier))
        return True

    def measure_some(self, stop: Callable[[], bool]) -> bool:
        """Run the deferred measurement's units until it is done (then the curve is saved and
        used: True) or ``stop()`` says so between two (False). True when there is none."""
        with self._curve_lock:
            m = self._measuring
            if m is None:
                return True
            if not m.run(stop):
                return False
            self._measured(m)
            return True

    def curve_state(self) -> dict:
        """Where the cost curve stands: ``cached`` (read from disk), ``measured`` (by this
        process), ``measuring`` (deferred: ``units`` done of all; ``meanwhile``: what prices
        trees until then, ``cache`` (the old curve, due again), ``provisional`` (the first
        round) or ``none`` (plain AR)), or ``none`` yet."""
        m = self._measuring
        if m is not None:
            meanwhile = "cache" if self._curve is not None else "provisional" if m.provisional_ready else "none"
            return {"state": "measuring", "units": [m.units_done, m.units_total], "meanwhile": meanwhile}
        if self._curve is None:
            return {"state": "none"}
        return {"state": self._curve_source or "measured"}

    def use_cost_curve(self, curve: CostCurve) -> None:
        """Price trees by ``curve`` from now on (a benchmark that measured one under its
        own conditions); what the steps taught the calibration against the old one is
        dropped."""
        with self._curve_lock:
            self._curve = curve
            self.calibration = StepCalibration()
            self._curve_chosen()

    def measured_curve(self) -> CostCurve | None:
        """The cost curve if it is loaded already (never measures it: that takes a while)."""
        return self._curve

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, special tokens spelled in it parsed (a prompt as given)."""
        return encode(self.tokenizer, text, special="parse")

    def generate(
        self,
        prompt_ids: Sequence[int],
        config: DecodeConfig | None = None,
        *,
        session: Session | None = None,
        sources: Sources | None = None,
        reference: Sequence[int] | None = None,
        stop_fn: StopLike | None = None,
        stop_ids: Collection[int] = (),
        cancel: threading.Event | None = None,
        on_step: StepCallback | None = None,
        first_allowed: Sequence[int] | None = None,
        preempt: Callable[[], bool] | None = None,
    ) -> Generation:
        config = config or DecodeConfig()
        drafter = make_drafter(config, sources, reference=reference, pool=self.pool)
        curve, pending = None, False
        if config.max_draft_tokens is None and drafter.drafts and drafter.adaptive_budget:
            m = self._measuring
            if self._curve is None and m is not None:  # (defer_cost_curve) its first round, else plain AR until then
                curve = m.provisional()
                if curve is None:
                    pending, config = True, replace(config, method="ar")
                    drafter = make_drafter(config, None, pool=self.pool)
            else:
                curve = self.cost_curve()
        gen = generate(
            self.verifier,
            self.tokenizer,
            drafter,
            prompt_ids,
            config,
            session=session,
            stop_fn=stop_fn,
            stop_ids=stop_ids,
            cancel=cancel,
            on_step=on_step,
            preempt=preempt,
            cost_curve=curve,
            first_allowed=first_allowed,
            calibration=self.calibration,
        )
        gen.stats.curve_pending = pending
        return gen

    def close(self) -> None:
        self.pool.shutdown(wait=False)
