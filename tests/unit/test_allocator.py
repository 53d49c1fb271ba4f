"""The producer's allocator tuning (cdc/sinks/allocator.py): when it applies, and bad values."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from cdc.sinks import allocator


def test_the_default_pad_applies_when_nothing_is_set() -> None:
    assert allocator.top_pad_setting({}) == allocator.DEFAULT_TOP_PAD


def test_a_users_own_glibc_setting_is_left_alone() -> None:
    assert allocator.top_pad_setting({"MALLOC_TOP_PAD_": "1048576"}) is None
    assert allocator.top_pad_setting({"GLIBC_TUNABLES": "glibc.malloc.top_pad=0"}) is None


def test_zero_turns_it_off_and_a_number_sets_it() -> None:
    assert allocator.top_pad_setting({allocator.ENV: "0"}) is None
    assert allocator.top_pad_setting({allocator.ENV: "8388608"}) == 8 << 20


@pytest.mark.parametrize("raw", ["lots", "-1", "1.5", "", str(2**31)])
def test_a_bad_value_names_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=allocator.ENV):
        allocator.top_pad_setting({allocator.ENV: raw})


def _tuned_in_a_fresh_process(env: dict[str, str]) -> str:
    code = (
        "from cdc.sinks import allocator; "
        "print(allocator.tune_for_producer(), allocator.tune_for_producer())"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_TOP_PAD_", "GLIBC_TUNABLES")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_tuned_once_per_process_on_glibc_and_not_when_turned_off() -> None:
    # Only glibc has the setting; elsewhere (musl, macOS) nothing is tuned, and that is what
    # this then checks.
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert _tuned_in_a_fresh_process({}) == ("True False" if glibc else "False False")
    assert _tuned_in_a_fresh_process({allocator.ENV: "0"}) == "False False"
    assert _tuned_in_a_fresh_process({"MALLOC_TOP_PAD_": "65536"}) == "False False"
