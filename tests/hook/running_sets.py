#!/usr/bin/env python3
"""running_sets.py - reads `nvsharectl status --json` samples, one document
per line, and says whether clients measured heavy ever held a GPU together
and how much GPU time each client had held when its load was first seen.

    running_sets.py SAMPLES [--max-unmeasured-ms MS]

Prints "heavy_pairs=N" and "measured_after_ms=[...]" on one line. Exit
status 1 when heavy clients held a GPU together in any sample, or (with
--max-unmeasured-ms) a client held the GPU longer than MS without a load."""
import json
import sys


def main():
    path = sys.argv[1]
    limit_ms = None
    if len(sys.argv) > 3 and sys.argv[2] == "--max-unmeasured-ms":
        limit_ms = float(sys.argv[3])
    heavy_pairs = 0
    measured_after_ms = {}
    unmeasured_too_long = set()
    for line in open(path):
        try:
            status = json.loads(line)
        except ValueError:
            continue  # a sample cut short when the run ended
        clients = {c["client_id"]: c for c in status["clients"]}
        for c in clients.values():
            held_ms = c["held_ns"] / 1e6
            if c["load_percent"] is not None:
                measured_after_ms.setdefault(c["client_id"], held_ms)
            elif limit_ms is not None and held_ms > limit_ms:
                unmeasured_too_long.add(c["client_id"])
        for gpu in status["gpus"]:
            heavy = [i for i in gpu["running_client_ids"]
                     if clients.get(i, {}).get("state") == "holding"
                     and (clients[i]["load_percent"] or 0) >= 50]
            heavy_pairs += len(heavy) > 1
    late = limit_ms is not None and (
        not measured_after_ms or unmeasured_too_long or
        max(measured_after_ms.values()) > limit_ms)
    print("heavy_pairs=%d measured_after_ms=%s%s" % (
        heavy_pairs, sorted(round(v) for v in measured_after_ms.values()),
        " (a client held the GPU %g ms unmeasured)" % limit_ms if late else ""))
    return 1 if heavy_pairs or late else 0


if __name__ == "__main__":
    sys.exit(main())
