"""``logical.zoned_timestamp_str`` (Debezium's ZonedTimestamp text) writes with ``isoformat``
the same text as the ``strftime`` form it replaced, except that a year below 1000 now has
four digits as in Java's ISO formatter (``strftime``'s ``%Y`` did not pad it): compared here
on generated instants of every year, naive and in several zones, with and without a
fraction."""

from __future__ import annotations

import datetime as dt
import random

from cdc.schema import logical


def _strftime_form(value: dt.datetime) -> str:
    """The reference: UTC through ``strftime``, the fraction only as long as needed."""
    utc = value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
    base = f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S")
    if utc.microsecond:
        base += ("." + f"{utc.microsecond:06d}").rstrip("0")
    return base + "Z"


def test_the_text_equals_the_strftime_form() -> None:
    rng = random.Random(7)
    zones = [None, dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)),
             dt.timezone(-dt.timedelta(hours=11)), dt.timezone(dt.timedelta(hours=14))]  # fmt: skip
    lo, hi = dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30)
    span = int((hi - lo).total_seconds())
    for _ in range(50_000):
        value = lo + dt.timedelta(seconds=rng.randrange(span))
        pick = rng.random()
        if pick < 0.3:
            value = value.replace(microsecond=rng.randrange(10**6))
        elif pick < 0.45:
            value = value.replace(microsecond=rng.choice([1, 10, 100_000, 120_000, 999_999]))
        if rng.random() < 0.05:  # years below 1000
            value = value.replace(year=rng.randrange(2, 1000), day=min(value.day, 28))
        value = value.replace(tzinfo=rng.choice(zones))
        assert logical.zoned_timestamp_str(value) == _strftime_form(value), value
    assert logical.zoned_timestamp_str(dt.datetime(2024, 1, 1, 12, 0, 0, 120_000)) == (
        "2024-01-01T12:00:00.12Z"
    )
    assert logical.zoned_timestamp_str(dt.datetime(999, 1, 1, tzinfo=dt.UTC)) == (
        "0999-01-01T00:00:00Z"
    )
