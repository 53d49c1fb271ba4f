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
        (r"(x{1,3})+y", True),  # a bounded count that varies, repeated
        (r"(a?a)+b", True),
        (r"(a{2})+", False),  # a fixed count
    ],
)
def test_nested_quantifiers_are_slow(pattern: str, slow: bool) -> None:
    assert slow_pattern(pattern) is slow


@pytest.mark.parametrize(
    ("pattern", "slow"),
    [
        (r"(a|a)*$", True),  # parsed as a(?:|): two empty alternatives
        (r"(ab|ab)*c", True),
        (r"(a|ab|b)*c", True),
        (r"(.|a)+", True),
        (r"([^a]|b)+", True),
        (r"(?i)(Ab|aC)+", True),  # case folded: A and a begin alike
        (r"(Ab|aC)+", False),
        (r"(\w|\d)+x", False),  # one class of single characters, no choice
        (r"([a-z]|_)+", False),
        (r"([^a]|a)+", False),
        (r"(foo|bar)+", False),
        (r"(ab|ac)*", False),  # parsed as a(?:b|c)
        (r"((a|)a)+b", True),  # an optional part: "aa" in one pass or two
        (r"(a|)*b", True),  # refused as well, though Python stops its empty passes
        (r"(a|ab)*+c", False),  # possessive: no backtracking into it
        (r"inventory\.(orders|customers)", False),
        (r".*\.(foo|bar)_\d+", False),  # a choice, but not repeated
        (r"(.*)\.(.*)\.(.*)\.(.*)", False),  # four: ~0.1 s on the longest name
        (r"(.*)\.(.*)\.(.*)\.(.*)\.(.*)", True),  # five: seconds
        (r"a?b?c?d?e?f?", False),  # an optional part has two counts only
        (r"(?>.*)(?>.*)(?>.*)(?>.*)(?>.*)", False),  # atomic: no backtracking into them
    ],
)
def test_repeated_choices_alike_and_many_quantifiers_are_slow(pattern: str, slow: bool) -> None:
    assert slow_pattern(pattern) is slow


ROUTER = {
    "transforms": "r",
    "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.r.regex": r"(\w+\.)*customers",
    "transforms.r.replacement": "c",
}


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"table.include.list": "db.(a+)+$"}, "table.include.list"),
        (ROUTER, "transforms.r.regex"),
        # column mappings and key columns are regular expressions too (a 31-character column
        # name took 50 s against this one)
        ({"column.mask.with.5.chars": "(.+)+x"}, "column.mask.with.5.chars"),
        ({"message.key.columns": "db.t:id;(a+)+:c"}, "message.key.columns"),
        ({"message.key.columns": "db.t:id,(\\w+_)*x"}, "message.key.columns"),
    ],
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
            h.patch_config("y", {key: extra[key] + "z"})
    finally:
        assert h.shutdown(5)
