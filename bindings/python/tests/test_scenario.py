# SPDX-License-Identifier: Apache-2.0
"""The shared scenario (examples/scenario.py): trainer TP2 x DP2 to
inference TP4, checked element by element, twice."""
import importlib.util
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load_example():
    path = os.path.join(HERE, "..", "examples", "scenario.py")
    spec = importlib.util.spec_from_file_location("scenario", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_scenario(capsys):
    sc = load_example()
    out = sc.run(verbose=True)
    printed = capsys.readouterr().out
    assert "all equal" in printed and "sent inter" in printed
    s = out["stats"]
    per_rank = out["per_rank"]
    # every byte an engine rank holds arrives once (nothing is local: the
    # engine ranks hold no source)
    engine_bytes = out["checked"]
    assert s["bytes_recv_inter"] + s["bytes_recv_intra"] == engine_bytes
    assert s["bytes_local"] == 0
    # trainers only send, across the domain boundary
    for r in range(4):
        assert per_rank[r]["bytes_recv_inter"] == 0
        assert per_rank[r]["bytes_recv_intra"] == 0
        assert per_rank[r]["bytes_sent_intra"] == 0
    # replicated norms cross once into the engine's domain and are
    # forwarded inside it: intra traffic only among engine ranks
    norm_bytes = sum(np.prod(shape) * 4 for name, dt, shape, kind
                     in sc.model() if kind == sc.REPLICATED)
    assert s["bytes_sent_intra"] == 3 * norm_bytes
    assert s["bytes_sent_inter"] == engine_bytes - 3 * norm_bytes
