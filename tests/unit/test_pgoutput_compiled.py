"""The compiled TupleData decoder against its pure-Python reference (``pgoutput._tuple_py``).

Well-formed tuples must decode to identical values; malformed ones must fail in both, as a
PgOutputError once ``decode_at`` has worded it. The live-server half (every column type the
connector maps, streamed from a real slot) is tests/integration/test_pgoutput_compiled_live.py.
"""

from __future__ import annotations

import random
import struct

import pytest

from connectors.postgres import _pgoutput_c as compiled  # built by the install
from connectors.postgres import pgoutput as po
from tests.unit.test_pgoutput import frames

compiled.configure(po.UNCHANGED_TOAST, po.PgOutputError)  # also under TIDEMARK_PURE_PYTHON=1
tuple_c = compiled.tuple_at
tuple_py = po._tuple_py

_TEXTS = ["", "a", "héllo wörld", "日本語", "emoji 🦀🐘", "\x00?", "x" * 5000, "12.50", "-0"]


def _column(rng: random.Random) -> tuple[bytes, object]:
    kind = rng.choice("tnub")
    if kind == "n":
        return b"n", None
    if kind == "u":
        return b"u", po.UNCHANGED_TOAST
    if kind == "t":
        text = rng.choice(_TEXTS) if rng.random() < 0.5 else str(rng.getrandbits(80))
        raw = text.encode()
        return b"t" + struct.pack("!i", len(raw)) + raw, text
    raw = rng.randbytes(rng.randrange(0, 40))
    return b"b" + struct.pack("!i", len(raw)) + raw, raw


def _tuple(rng: random.Random, n: int) -> tuple[bytes, list[object]]:
    parts, values = [struct.pack("!h", n)], []
    for _ in range(n):
        raw, value = _column(rng)
        parts.append(raw)
        values.append(value)
    return b"".join(parts), values


def test_generated_tuples_decode_identically_at_any_offset() -> None:
    rng = random.Random(18)
    for _ in range(3000):
        body, values = _tuple(rng, rng.randrange(0, 40))
        prefix = rng.randbytes(rng.randrange(0, 30))
        buf = prefix + body + rng.randbytes(rng.randrange(0, 5))
        want = tuple_py(buf, len(prefix), 3)
        got = tuple_c(buf, len(prefix), 3)
        assert got == want
        assert got[0] == values
        assert all(g is w for g, w in zip(got[0], want[0], strict=True) if w is None)
        assert all(g is po.UNCHANGED_TOAST for g in got[0] if g is po.UNCHANGED_TOAST)
        assert tuple_c(memoryview(buf), len(prefix)) == tuple_py(buf, len(prefix))


def test_recorded_messages_decode_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = frames()
    monkeypatch.setattr(po, "_tuple", tuple_py)
    want = [po.decode(f) for f in recorded]
    monkeypatch.setattr(po, "_tuple", tuple_c)
    assert [po.decode(f) for f in recorded] == want
    assert any(isinstance(m, po.Insert | po.Update | po.Delete) for m in want)


def test_malformed_tuples_fail_in_both() -> None:
    rng = random.Random(5)
    both_failed = 0
    for _ in range(3000):
        body, _ = _tuple(rng, rng.randrange(1, 12))
        cut = rng.randrange(0, len(body))
        mutated = bytearray(body[:cut] if rng.random() < 0.5 else body)
        if rng.random() < 0.5 and len(mutated) > 2:
            mutated[rng.randrange(2, len(mutated))] = rng.randrange(256)
        buf = bytes(mutated)
        try:
            want: object = tuple_py(buf, 0)
        except Exception:
            want = None
        try:
            got: object = tuple_c(buf, 0)
        except ValueError:  # PgOutputError is one too
            got = None
        if want is None:
            both_failed += got is None
            assert got is None, f"the compiled decoder accepted what the reference rejects: {buf!r}"
        elif got is not None:
            assert got == want
        else:
            # only where the reference's slices silently came up short (or went backwards)
            assert not _well_formed(buf), buf
    assert both_failed > 100


def _well_formed(buf: bytes) -> bool:
    """Whether every column of the tuple at 0 lies inside ``buf`` (no short read)."""
    (n,) = struct.unpack_from("!h", buf)
    pos = 2
    for _ in range(n):
        if pos >= len(buf):
            return False
        if buf[pos] in b"tb":
            if pos + 5 > len(buf):
                return False
            (length,) = struct.unpack_from("!i", buf, pos + 1)
            if length < 0 or pos + 5 + length > len(buf):
                return False
            pos += 5 + length
        else:
            pos += 1
    return True


def test_errors_are_worded_like_the_reference() -> None:
    bad = struct.pack("!h", 1) + b"z"
    with pytest.raises(po.PgOutputError) as c_err:
        tuple_c(b"0123" + bad, 4, 2)
    with pytest.raises(po.PgOutputError) as py_err:
        tuple_py(b"0123" + bad, 4, 2)
    assert str(c_err.value) == str(py_err.value) == "unknown tuple data kind 'z' at byte 4"
    with pytest.raises(ValueError, match="runs past the end of the message at byte 7"):
        tuple_c(struct.pack("!h", 1) + b"t" + struct.pack("!i", 10) + b"short", 0)
