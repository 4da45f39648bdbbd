"""The engine bench's JSON files that env_ab.sh leaves in OUT (LABEL_ROUND.json), read one way
for the scripts that summarize them (where_time_goes.sh, phase_chains.sh)."""
import json
import os
import statistics


def median_tpots(out, label, rounds):
    """For one variant: ((model, batch) -> median graph TPOT ms over the rounds that wrote a
    file, model -> its layer count). A round whose run died (no file) is left out."""
    tpots, layers = {}, {}
    for r in range(1, rounds + 1):
        path = os.path.join(out, f"{label}_{r}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            models = json.load(f)["models"]
        for name, m in models.items():
            layers[name] = m["config"]["layers"]
            for row in m.get("decode", []):
                tpots.setdefault((name, row["batch"]), []).append(row["tpot_ms"])
    return {k: statistics.median(v) for k, v in tpots.items()}, layers
