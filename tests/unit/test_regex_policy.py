"""Patterns whose matching can take exponential time may come from the YAML file, not over
REST (worker/regex_policy.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.unit.test_worker_herder import Engines, make, memory, task_state
from tests.unit.test_worker_task import wait_for
from worker.config import ConnectorEntry
from worker.herder import BadRequest
from worker.regex_policy import slow_pattern


@pytest.mark.parametrize(
    ("pattern", "slow"),
    [
        (r"(a+)+$", True),
        (r"(\w+\.)*customers", True),
        (r"inventory\.(?:x*y)*", True),
        (r"inventory\.(orders|customers)", False),
        (r"inventory\..*", False),
        (r"(ab){2,5}c", False),
        (r"(?>a+)+", False),  # atomic: no backtracking into it
        (r"a++b", False),
        (r"[(", False),  # not a pattern at all: left to the config's validation
    ],
)
def test_nested_quantifiers_are_slow(pattern: str, slow: bool) -> None:
    assert slow_pattern(pattern) is slow


ROUTER = {
    "transforms": "r",
    "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.r.regex": r"(\w+\.)*customers",
    "transforms.r.replacement": "c",
}


@pytest.mark.parametrize(
    ("extra", "key"),
    [({"table.include.list": "db.(a+)+$"}, "table.include.list"), (ROUTER, "transforms.r.regex")],
)
def test_a_slow_pattern_is_refused_over_rest_and_runs_from_the_yaml_file(
    tmp_path: Path, extra: dict[str, str], key: str
) -> None:
    engines = Engines()
    h = make(tmp_path, engines, MemoryOffsetStore())
    h.start([ConnectorEntry(name="y", config=memory(**extra))])
    try:
        with pytest.raises(BadRequest, match=f"{key}: .* nests a quantifier"):
            h.create("r", memory(**extra))
        # validate (REST's own endpoint) says so before a create is tried
        infos = h.validate("memory", memory(**extra))
        assert infos["error_count"] == 1
        errors = [c["value"]["errors"] for c in infos["configs"] if c["value"]["name"] == key]
        assert errors and "nests a quantifier" in errors[0][0]
        wait_for(lambda: engines.running("y"), what="the YAML file's connector")
        # the YAML connector edited over REST keeps its own pattern; a new one is checked
        h.patch_config("y", {"max.batch.size": "5"})
        wait_for(lambda: len(engines.built["y"]) == 2, what="restart")
        assert task_state(h, "y") == "RUNNING"
        with pytest.raises(BadRequest, match="nests a quantifier"):
            h.patch_config("y", {key: "(x+)+y"})
    finally:
        assert h.shutdown(5)
