"""The random 2-layer model of this replay: Qwen2.5-Coder-0.5B's config and tokenizer with
hidden 128, 2 layers, 4 heads on 2 KV heads (39M parameters, most of them the embeddings),
seeded. Its steps cost ~4 ms on the CPU, so drafting is a large share of a step, as on a
GPU; with method rest its drafts (D_c only) are never accepted.

    python docs/bench/replay-s21-tiny-rest/make_model.py /tmp/tinyqwen   # needs qwen2.5-coder-0.5b fetched
    fastcoder bench replay --model /tmp/tinyqwen --dtype float32 --files 4 --max-keys 150 \
        --methods ar,rest --layouts default,nofallback --out DIR
"""

import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from fastcoder.models.resolve import resolve_model

out = sys.argv[1]
src = resolve_model("qwen2.5-coder-0.5b", progress=False)
cfg = AutoConfig.from_pretrained(src)
cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads = 128, 2, 4, 2
cfg.intermediate_size, cfg.head_dim, cfg.layer_types = 256, 32, ["full_attention"] * 2
torch.manual_seed(0)
AutoModelForCausalLM.from_config(cfg).save_pretrained(out)
AutoTokenizer.from_pretrained(src).save_pretrained(out)
