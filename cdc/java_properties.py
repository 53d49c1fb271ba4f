"""Java ``.properties`` text, as far as the files people hand a worker use it: the secrets files
of ``FileConfigProvider``, the REST credentials file, the Cassandra connector's SSL config file.
"""

from __future__ import annotations

import re


def parse_properties(text: str) -> dict[str, str]:
    """Java properties: ``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` line
    continuations. Enough for the secrets files people point FileConfigProvider at."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for line in text.splitlines():
        stripped = line.strip() if not logical else line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical.append(stripped[:-1])
            continue
        logical.append(stripped)
        entry = "".join(logical)
        logical = []
        match = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", entry)
        if match:
            out[match.group(1).replace("\\", "")] = match.group(2)
        else:
            out[entry.replace("\\", "")] = ""
    return out
