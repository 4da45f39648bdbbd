#!/usr/bin/env python3
"""rtgen-synth-model's file read by the `gguf` package (an independent reader), its weights
recomputed here from the generator's definition (engine/model/synthetic_model.h): FNV-1a of the
tensor name, SplitMix64 of a counter, a centred sum of four 24-bit uniforms, one rounding to
float. Every value must match bit for bit, so a seed gives the same file on every platform.

Usage: synthetic_weights_reference_test.py --tool build/bin/rtgen-synth-model
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import gguf
import numpy as np

MASK = (1 << 64) - 1


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def to_f32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def expected(seed, name, n, is_norm):
    key = splitmix64(seed) ^ fnv1a64(name)
    scale = 0.034641016151377546 / 16777216.0
    out = []
    for i in range(n):
        total = sum(splitmix64((key + 4 * i + j) & MASK) >> 40 for j in range(4))
        x = to_f32((total - (1 << 25)) * scale)
        out.append(to_f32(1.0 + x) if is_norm else x)
    return np.array(out, dtype=np.float32)


def hf_to_gguf_rows(values, rows, heads):
    """The GGUF row order of a q or k projection (llama.cpp's interleaved RoPE): within each
    head, the rows of the first and second half of its dimensions alternate."""
    m = values.reshape(heads, 2, rows // heads // 2, -1)
    return m.swapaxes(1, 2).reshape(-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    args = parser.parse_args()
    seed = 12345678901234567  # past 32 bits: both halves of the seed count
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.gguf")
        subprocess.run([args.tool, "--shape", "tiny", "--dtype", "f32", "--seed", str(seed),
                        "--out", path], check=True, stdout=subprocess.DEVNULL)
        tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
        # tiny: hidden 64, 4 query heads, 2 key/value heads (SyntheticShape in synthetic_model.cc).
        permuted = {"blk.0.attn_q.weight": 4, "blk.1.attn_k.weight": 2}
        checked = ["token_embd.weight", "blk.0.attn_q.weight", "blk.1.attn_k.weight",
                   "blk.0.attn_v.weight", "blk.1.ffn_down.weight", "blk.1.attn_norm.weight",
                   "output_norm.weight"]
        for name in checked:
            if name not in tensors:
                print(f"FAIL {name}: not in the file (has {sorted(tensors)[:8]}...)")
                failures += 1
                continue
            got = np.asarray(tensors[name].data, dtype=np.float32).reshape(-1)
            want = expected(seed, name, got.size, name.endswith("norm.weight"))
            if name in permuted:
                rows = got.size // 64
                want = hf_to_gguf_rows(want, rows, permuted[name])
            differ = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
            std = float(np.std(got))
            print(f"{name}: {got.size} values, {differ} differ, std {std:.5f}")
            if differ:
                first = int(np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))[0])
                print(f"FAIL {name}[{first}]: file {got[first]!r}, reference {want[first]!r}")
                failures += 1
            if not name.endswith("norm.weight") and abs(std - 0.02) > 0.002:
                print(f"FAIL {name}: standard deviation {std:.5f}, want 0.02 +- 0.002")
                failures += 1
    print("PASS" if failures == 0 else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
