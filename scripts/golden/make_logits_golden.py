#!/usr/bin/env python3
"""Writes golden next-token logits and greedy continuations for SmolLM2-135M-Instruct (Q4_1 GGUF).

The reference is Hugging Face transformers, which dequantises the GGUF to an fp32 model and builds
its own tokenizer from the same file: an implementation independent of rtgen. torch and
transformers are heavy, so this runs once (in any venv that has them) and its output is checked in:

    python3 -m venv /tmp/golden && /tmp/golden/bin/pip install torch transformers gguf accelerate
    /tmp/golden/bin/python scripts/golden/make_logits_golden.py

Writes tests/golden/data/logits.json (prompts, their token ids, greedy continuations, top-k) and
tests/golden/data/logits.f32 (full next-token logits, little-endian float32, one row per prompt).
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.path.join(ROOT, "models")
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(ROOT, "tests", "golden", "data")
NEW_TOKENS = 32

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village,",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "Les élèves ont étudié la photosynthèse et",
    "1, 2, 3, 4, 5,",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
]


def main() -> int:
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, gguf_file=GGUF, dtype=torch.float32)
    model.eval()
    rows = []
    logits_rows = []
    for prompt in PROMPTS:
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model(torch.tensor([ids]))
            last = out.logits[0, -1].float().numpy()
            gen = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                                 pad_token_id=tok.eos_token_id)
        continuation = gen[0, len(ids):].tolist()
        top = np.argsort(-last)[:10].tolist()
        rows.append({"prompt": prompt, "prompt_ids": ids, "greedy_ids": continuation,
                     "greedy_text": tok.decode(continuation), "top10_ids": top,
                     "top10_logits": [float(last[i]) for i in top]})
        logits_rows.append(last.astype("<f4"))
        print(repr(prompt), "->", repr(tok.decode(continuation)), file=sys.stderr)
    meta = {"model": GGUF, "reference": "transformers " + __import__("transformers").__version__ +
            ", torch " + torch.__version__ + ", fp32", "vocab_size": int(logits_rows[0].shape[0]),
            "new_tokens": NEW_TOKENS, "cases": rows}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "logits.json"), "w") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
    np.stack(logits_rows).tofile(os.path.join(OUT, "logits.f32"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
