"""Engine: a loaded model + tokenizer, its verifier and cost curve, and a search pool.

The one entry point the CLI, the server and the benchmark call::

    engine = Engine(model, tokenizer)
    gen = engine.generate(prompt_ids, DecodeConfig(method="fastcoder"), sources=Sources(dr=..., dc=...))
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Collection, Sequence

from fastcoder.budget import CostCurve, StepCalibration, load_or_measure
from fastcoder.config import DecodeConfig
from fastcoder.decode import Generation, StepCallback, generate
from fastcoder.drafters import Sources, make_drafter
from fastcoder.matmul import is_packed
from fastcoder.session import Session
from fastcoder.tokens import encode
from fastcoder.stops import StopLike
from fastcoder.verifier import Verifier


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
                 explicit_attention: bool | None = False) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        # explicit_attention: None = where probed invariant and faster (Verifier), False = never (default)
        self.verifier = Verifier(model, record_margins=record_margins, explicit_attention=explicit_attention)
        self.pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="fastcoder-search")
        self._curve: CostCurve | None = None
        self._curve_lock = threading.Lock()
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

    def cost_curve(self) -> CostCurve:
        """c(k) for this model, device and dtype (measured once, cached on disk)."""
        with self._curve_lock:
            if self._curve is None:
                # everything that changes what a step costs: a curve measured with another
                # attention, graph mode, matmul path (packed weights) or step padding (batch-invariant) is not this one's
                attn = getattr(self.model.config, "_attn_implementation", None) or "?"
                packed = "|packed" if is_packed(self.model) else ""
                inv = "|invariant" if self.verifier.invariant else ""
                if self.verifier.explicit_from is not None:
                    inv += f"|explicit>={self.verifier.explicit_from}"
                key = f"{self.name}|{self.device}|{self.dtype}|attn={attn}|graphs={self.verifier.use_graphs}{packed}{inv}|{_host(self.device)}"
                self._curve = load_or_measure(self.verifier, key)
            return self._curve

    def use_cost_curve(self, curve: CostCurve) -> None:
        """Price trees by ``curve`` from now on (a benchmark that measured one under its
        own conditions); what the steps taught the calibration against the old one is
        dropped."""
        with self._curve_lock:
            self._curve = curve
            self.calibration = StepCalibration()

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
        curve = self.cost_curve() if config.max_draft_tokens is None and drafter.drafts and drafter.adaptive_budget else None
        return generate(
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

    def close(self) -> None:
        self.pool.shutdown(wait=False)
