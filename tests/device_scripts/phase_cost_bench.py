#!/usr/bin/env python3
"""A stand-in rtgen-engine-bench for the device-script tests, whose TPOT is a sum it knows:
40 us of step kernels, and per layer (30 layers) qkv 2.0, attention 3.0, o 1.5, gate_up 2.5 and
down 2.0 us for the phases RTGEN_DIAG_SKIP leaves running, plus 0.8 us a layer when attention and
o both run. It writes one decode row (SmolLM2, batch 1) to --json; with FAKE_FAIL_SKIP it fails,
writing nothing, when the skipped parts are exactly those."""
import json, os, sys
args = sys.argv[1:]
json_path = args[args.index("--json") + 1]
skips = set(filter(None, os.environ.get("RTGEN_DIAG_SKIP", "").split(",")))
fail = os.environ.get("FAKE_FAIL_SKIP")  # fail (writing nothing) when the skips are these
if fail is not None and skips == set(filter(None, fail.split(","))):
    sys.exit(3)
cost = {"qkv": 2.0, "attention": 3.0, "o": 1.5, "gate_up": 2.5, "down": 2.0}
running = [p for p in cost if p not in skips]
per_layer = sum(cost[p] for p in running) + (0.8 if {"attention", "o"} <= set(running) else 0)
tpot_ms = (40.0 + 30 * per_layer) / 1e3
json.dump({"models": {"smollm2-135m": {"config": {"layers": 30},
                                       "decode": [{"batch": 1, "tpot_ms": tpot_ms}]}}},
          open(json_path, "w"))
