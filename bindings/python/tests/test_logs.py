# SPDX-License-Identifier: Apache-2.0
"""The library's log from Python: levels, subsystems, lines routed into
logging (from the library's own threads too)."""
import logging
import subprocess
import sys

import numpy as np
import pytest

import reshard
from reshard import Shard


def one_sync(world=4):
    with reshard.Context.local(world) as ctx:
        src = ctx.layout().add_tensor("w", "float32", (8, 4))
        src.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[0, 1],
                        placements=[Shard(0)])
        dst = ctx.layout().add_tensor("w", "float32", (8, 4))
        dst.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[2, 3],
                        placements=[Shard(1)])
        with ctx.plan(src, dst) as plan:
            full = np.arange(32, dtype=np.float32).reshape(8, 4)
            plan.bind("src", 0, 0, full[:4].copy())
            plan.bind("src", 1, 0, full[4:].copy())
            out = [np.zeros((8, 2), np.float32) for _ in range(2)]
            plan.bind("dst", 2, 0, out[0])
            plan.bind("dst", 3, 0, out[1])
            plan.execute()
        assert (np.concatenate(out, axis=1) == full).all()


@pytest.fixture
def routed(caplog):
    before = reshard.log_level()
    reshard.log_to_python("reshard.test")
    caplog.set_level(logging.DEBUG, logger="reshard.test")
    yield caplog
    reshard.log_to_stderr()
    reshard.set_log_level(before[0], sorted(before[1]))


def test_info_lines_reach_logging(routed):
    reshard.set_log_level("info")
    one_sync()
    got = [(r.levelno, r.subsystem, r.rank, r.getMessage())
           for r in routed.records]
    assert any(lv == logging.INFO and s == "plan" and "moves" in m
               for lv, s, _, m in got), got
    assert any(s == "exec" and "execution ended RS_OK" in m
               for _, s, _, m in got), got
    assert all(lv == logging.INFO for lv, _, _, _ in got), got
    assert all(r is None for _, s, r, _ in got if s == "context")


def test_trace_and_subsystems(routed):
    reshard.set_log_level("trace", ["exec"])
    assert reshard.log_level() == ("trace", frozenset({"exec"}))
    one_sync()
    subs = {r.subsystem for r in routed.records}
    assert subs == {"exec"}, subs
    steps = [r for r in routed.records if "step 0" in r.getMessage()]
    assert steps and all(r.levelno == logging.DEBUG for r in steps)
    assert {r.rank for r in steps} <= {0, 1, 2, 3}


def test_a_failure_is_a_warning(routed):
    reshard.set_log_level("warn")
    with reshard.Context.local(1) as ctx:
        with pytest.raises(reshard.Error) as e:
            ctx.layout().add_tensor("w", "float32", (0,))
    warn = [r for r in routed.records if r.levelno == logging.WARNING]
    assert len(warn) == 1 and warn[0].subsystem == "layout"
    assert "RS_ERR_BAD_SHAPE" in warn[0].getMessage(), warn[0].getMessage()
    del e


def test_off_logs_nothing(routed):
    reshard.set_log_level("none")
    one_sync()
    assert not routed.records


def test_bad_levels_are_refused():
    with pytest.raises(reshard.Error) as e:
        reshard.set_log_level("loud")
    assert e.value.status == reshard.Status.INVALID_ARGUMENT
    with pytest.raises(reshard.Error):
        reshard.set_log_level(7)
    with pytest.raises(reshard.Error) as e:
        reshard.set_log_level("info", ["planner"])
    assert "planner" in str(e.value)


def test_environment_sets_the_level():
    code = ("import reshard; print(reshard.log_level()[0], "
            "sorted(reshard.log_level()[1]))")
    env = {"RESHARD_DEBUG": "TRACE", "RESHARD_DEBUG_SUBSYS": "plan,exec"}
    import os
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=dict(os.environ, **env), check=True)
    assert out.stdout.split("\n")[0] == "trace ['exec', 'plan']", out
