"""Crafted event logs whose metric streams collapse (or stay healthy), for the rules as
they run inside ingestion."""


def metric_events(series: dict[str, list[float]], start_seq=0, start_step=1, t0=1_700_000_000.0):
    """One `metrics` event per step with the given values (all lists the same length)."""
    length = len(next(iter(series.values())))
    return [
        {"seq": start_seq + i, "time": t0 + 10 * i, "type": "metrics", "step": start_step + i,
         "values": {name: values[i] for name, values in series.items()}}
        for i in range(length)
    ]


def collapsing(steps=12):
    """Entropy from 1.2 to ~0.05, majority_ratio to 1.0: TTRL's lock-in (EVOL-RL Fig. 1)."""
    entropy = [1.2 * (0.7 ** i) for i in range(steps)]
    majority = [min(1.0, 0.5 + 0.06 * i) for i in range(steps)]
    length = [300.0 - 5 * i for i in range(steps)]
    return {"entropy": entropy, "majority_ratio": majority, "response_length/mean": length}


def healthy(steps=12):
    return {"entropy": [1.2 - 0.01 * i for i in range(steps)], "majority_ratio": [0.5 + 0.01 * i for i in range(steps)],
            "response_length/mean": [300.0 + i for i in range(steps)]}


def recovering(steps=12):
    """Collapses, then entropy recovers (EVOL-RL's evolving point, Fig. 3)."""
    first = collapsing(steps)
    entropy = first["entropy"] + [1.0] * steps
    majority = first["majority_ratio"] + [0.6] * steps
    length = first["response_length/mean"] + [300.0] * steps
    return {"entropy": entropy, "majority_ratio": majority, "response_length/mean": length}
