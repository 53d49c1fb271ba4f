"""An in-process, in-memory stand-in for the Confluent Schema Registry.

It is a stand-in, not the real thing: neither Confluent Schema Registry nor Apicurio can be
installed here, so tests and the local stack talk to this server instead. It speaks the subset
of the Confluent REST API the Avro converter and the apply job use, with the same paths, bodies,
status codes and ``{"error_code": ..., "message": ...}`` error bodies:

* ``GET /subjects``, ``GET|DELETE /subjects/{s}``, ``GET /subjects/{s}/versions``,
  ``POST /subjects/{s}/versions`` (register), ``POST /subjects/{s}`` (look up),
  ``GET|DELETE /subjects/{s}/versions/{v|latest}``, ``GET /subjects/{s}/versions/{v}/schema``
* ``GET /schemas/ids/{id}``, ``GET /schemas/types``
* ``GET|PUT /config``, ``GET|PUT|DELETE /config/{s}``
* ``POST /compatibility/subjects/{s}/versions/{v|latest}``

Schema ids are global and stable: an identical schema (compared after JSON normalisation) gets
the same id under every subject, as in the real registry. Compatibility is checked minimally
with Avro resolution rules (added fields need defaults, types may only widen, enums may only
grow) and enforced on registration like the real registry, default level ``BACKWARD``.

Run ``python -m cdc.converters.registry_server --port 8081`` for the local stack.
"""

from __future__ import annotations

import argparse
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import fastavro
import orjson

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# -- Avro compatibility (minimal) --------------------------------------------------------------
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}


def _collect(node: Any, space: str | None, names: dict[str, Any]) -> None:
    """Index every named type by full name so references can be resolved."""
    if isinstance(node, list):
        for branch in node:
            _collect(branch, space, names)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        full = _full_name(node, space)
        names[full] = node
        space = full.rpartition(".")[0] or None
        for f in node.get("fields", []):
            _collect(f["type"], space, names)
    elif kind == "array":
        _collect(node["items"], space, names)
    elif kind == "map":
        _collect(node["values"], space, names)
    elif isinstance(kind, dict | list):
        _collect(kind, space, names)


def _full_name(node: dict[str, Any], space: str | None) -> str:
    name = str(node["name"])
    if "." in name:
        return name
    ns = node.get("namespace", space)
    return f"{ns}.{name}" if ns else name


class _Resolver:
    """Can data written with ``writer`` be read with ``reader``? (Avro schema resolution.)"""

    def __init__(self, reader: Any, writer: Any) -> None:
        self.rnames: dict[str, Any] = {}
        self.wnames: dict[str, Any] = {}
        _collect(reader, None, self.rnames)
        _collect(writer, None, self.wnames)
        self.assumed: set[tuple[str, str]] = set()
        self.problems: list[str] = []

    def check(self, reader: Any, writer: Any) -> bool:
        return self._ok(reader, None, writer, None, "")

    def _deref(self, node: Any, space: str | None, names: dict[str, Any]) -> tuple[Any, str | None]:
        if isinstance(node, dict) and not isinstance(node.get("type"), str):
            return self._deref(node["type"], space, names)
        if isinstance(node, str) and node not in _PRIMITIVES:
            full = node if "." in node or space is None else f"{space}.{node}"
            target = names.get(full, names.get(node))
            if target is None:
                raise ApiError(422, 42201, f"Invalid schema: unknown type {node!r}")
            node = target
        if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
            full = _full_name(node, space)
            return node, full.rpartition(".")[0] or None
        return node, space

    def _ok(self, r: Any, rspace: str | None, w: Any, wspace: str | None, path: str) -> bool:
        r, rspace = self._deref(r, rspace, self.rnames)
        w, wspace = self._deref(w, wspace, self.wnames)
        if isinstance(w, list):
            return all(self._ok(r, rspace, b, wspace, path) for b in w)
        if isinstance(r, list):
            if any(self._quiet(b, rspace, w, wspace) for b in r):
                return True
            return self._fail(path, "writer type is not in the reader's union")
        rt = r if isinstance(r, str) else r["type"]
        wt = w if isinstance(w, str) else w["type"]
        if rt != wt:
            if (wt, rt) in _PROMOTIONS:
                return True
            return self._fail(path, f"type changed from {wt} to {rt}")
        if rt == "record":
            return self._record(r, rspace, w, wspace, path)
        if rt == "enum":
            missing = set(w["symbols"]) - set(r["symbols"])
            if missing and "default" not in r:
                return self._fail(path, f"enum symbols removed: {sorted(missing)}")
            return True
        if rt == "fixed" and r.get("size") != w.get("size"):
            return self._fail(path, "fixed size changed")
        if rt == "array":
            return self._ok(r["items"], rspace, w["items"], wspace, path + "[]")
        if rt == "map":
            return self._ok(r["values"], rspace, w["values"], wspace, path + "{}")
        return True

    def _record(self, r: Any, rspace: str | None, w: Any, wspace: str | None, path: str) -> bool:
        key = (_full_name(r, rspace), _full_name(w, wspace))
        if key in self.assumed:
            return True
        self.assumed.add(key)
        wfields = {f["name"]: f for f in w.get("fields", [])}
        for alias_owner in w.get("fields", []):
            for alias in alias_owner.get("aliases", []):
                wfields.setdefault(alias, alias_owner)
        ok = True
        for f in r.get("fields", []):
            match = wfields.get(f["name"])
            if match is None:
                match = next((wfields[a] for a in f.get("aliases", []) if a in wfields), None)
            where = f"{path}/{f['name']}"
            if match is None:
                if "default" not in f:
                    ok = self._fail(where, "reader field has no default and is missing in writer")
                continue
            ok = self._ok(f["type"], rspace, match["type"], wspace, where) and ok
        return ok

    def _quiet(self, r: Any, rspace: str | None, w: Any, wspace: str | None) -> bool:
        saved = list(self.problems)
        ok = self._ok(r, rspace, w, wspace, "")
        self.problems = saved
        return ok

    def _fail(self, path: str, why: str) -> bool:
        self.problems.append(f"{path or '/'}: {why}")
        return False


def compatibility_problems(new: Any, old: Any, level: str) -> list[str]:
    """Why ``new`` may not follow ``old`` under ``level`` (empty when it may)."""
    problems: list[str] = []
    base = level.removesuffix("_TRANSITIVE")
    if base in ("BACKWARD", "FULL"):
        backward = _Resolver(new, old)
        backward.check(new, old)
        problems += [f"BACKWARD {p}" for p in backward.problems]
    if base in ("FORWARD", "FULL"):
        forward = _Resolver(old, new)
        forward.check(old, new)
        problems += [f"FORWARD {p}" for p in forward.problems]
    return problems


# -- state -------------------------------------------------------------------------------------
class RegistryState:
    """The registry's data, guarded by one lock (requests are tiny and rare)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: list[str] = []  # id - 1 -> schema text
        self.ids: dict[str, int] = {}  # normalised schema -> id
        self.subjects: dict[str, list[int]] = {}  # subject -> schema id per version
        self.levels: dict[str, str] = {}
        self.global_level = "BACKWARD"

    def parse(self, text: Any) -> tuple[str, Any, str]:
        """Validate a schema; returns (stored text, parsed JSON, identity key)."""
        if not isinstance(text, str):
            raise ApiError(422, 42201, "Invalid schema: 'schema' must be a string")
        try:
            parsed = orjson.loads(text)
            fastavro.parse_schema(parsed)
        except Exception as exc:
            raise ApiError(422, 42201, f"Invalid schema {text}: {exc}") from None
        return (
            orjson.dumps(parsed).decode(),
            parsed,
            orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS).decode(),
        )

    def level(self, subject: str) -> str:
        return self.levels.get(subject, self.global_level)

    def versions(self, subject: str) -> list[int]:
        found = self.subjects.get(subject)
        if not found:
            raise ApiError(404, 40401, f"Subject '{subject}' not found.")
        return found

    def version_index(self, subject: str, version: str) -> int:
        versions = self.versions(subject)
        if version in ("latest", "-1"):
            return len(versions) - 1
        if not re.fullmatch(r"\d+", version) or int(version) < 1:
            raise ApiError(
                422,
                42202,
                "The specified version '" + version + "' is not a valid version id. Allowed "
                'values are between [1, 2^31-1] and the string "latest"',
            )
        if int(version) > len(versions):
            raise ApiError(404, 40402, f"Version {version} not found.")
        return int(version) - 1

    def describe(self, subject: str, index: int) -> dict[str, Any]:
        schema_id = self.subjects[subject][index]
        return {
            "subject": subject,
            "version": index + 1,
            "id": schema_id,
            "schema": self.schemas[schema_id - 1],
        }

    def register(self, subject: str, text: Any) -> int:
        stored, parsed, key = self.parse(text)
        versions = self.subjects.setdefault(subject, [])
        existing = self.ids.get(key)
        if existing is not None and existing in versions:
            return existing
        level = self.level(subject)
        if versions and level != "NONE":
            older = versions if level.endswith("_TRANSITIVE") else versions[-1:]
            for schema_id in older:
                old = orjson.loads(self.schemas[schema_id - 1])
                problems = compatibility_problems(parsed, old, level)
                if problems:
                    raise ApiError(
                        409,
                        409,
                        "Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: {problems}',
                    )
        if existing is None:
            self.schemas.append(stored)
            existing = self.ids[key] = len(self.schemas)
        versions.append(existing)
        return existing


# -- HTTP --------------------------------------------------------------------------------------
def _body(handler: BaseHTTPRequestHandler) -> Any:
    length = int(handler.headers.get("Content-Length") or 0)
    raw = handler.rfile.read(length) if length else b""
    try:
        return orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        raise ApiError(400, 400, "Unrecognized request body: not JSON") from None


def _route(
    state: RegistryState, method: str, path: str, query: dict[str, list[str]], body: Any
) -> Any:
    parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
    with state.lock:
        match (method, parts):
            case ("GET", ["subjects"]):
                return sorted(s for s, v in state.subjects.items() if v)
            case ("GET", ["schemas", "types"]):
                return ["AVRO"]
            case ("GET", ["schemas", "ids", sid]) if sid.isdigit():
                if not 1 <= int(sid) <= len(state.schemas):
                    raise ApiError(404, 40403, f"Schema {sid} not found")
                return {"schema": state.schemas[int(sid) - 1]}
            case ("GET", ["subjects", subject, "versions"]):
                return list(range(1, len(state.versions(subject)) + 1))
            case ("POST", ["subjects", subject, "versions"]):
                return {"id": state.register(subject, _schema_field(body))}
            case ("POST", ["subjects", subject]):
                versions = state.versions(subject)
                _, _, key = state.parse(_schema_field(body))
                schema_id = state.ids.get(key)
                if schema_id is None or schema_id not in versions:
                    raise ApiError(404, 40403, "Schema not found")
                return state.describe(subject, versions.index(schema_id))
            case ("DELETE", ["subjects", subject]):
                versions = state.versions(subject)
                del state.subjects[subject]
                return list(range(1, len(versions) + 1))
            case ("GET", ["subjects", subject, "versions", version]):
                return state.describe(subject, state.version_index(subject, version))
            case ("GET", ["subjects", subject, "versions", version, "schema"]):
                described = state.describe(subject, state.version_index(subject, version))
                return orjson.loads(described["schema"])
            case ("DELETE", ["subjects", subject, "versions", version]):
                index = state.version_index(subject, version)
                state.subjects[subject].pop(index)
                return index + 1
            case ("POST", ["compatibility", "subjects", subject, "versions", version]):
                index = state.version_index(subject, version)
                old_id = state.subjects[subject][index]
                _, parsed, _ = state.parse(_schema_field(body))
                level = state.level(subject)
                old = orjson.loads(state.schemas[old_id - 1])
                problems = [] if level == "NONE" else compatibility_problems(parsed, old, level)
                answer: dict[str, Any] = {"is_compatible": not problems}
                if query.get("verbose", ["false"])[0] == "true":
                    answer["messages"] = problems
                return answer
            case ("GET", ["config"]):
                return {"compatibilityLevel": state.global_level}
            case ("PUT", ["config"]):
                state.global_level = _level(body)
                return {"compatibility": state.global_level}
            case ("GET", ["config", subject]):
                if subject in state.levels:
                    return {"compatibilityLevel": state.levels[subject]}
                if query.get("defaultToGlobal", ["false"])[0] == "true":
                    return {"compatibilityLevel": state.global_level}
                raise ApiError(
                    404,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            case ("PUT", ["config", subject]):
                state.levels[subject] = _level(body)
                return {"compatibility": state.levels[subject]}
            case ("DELETE", ["config", subject]):
                if subject not in state.levels:
                    raise ApiError(404, 40401, f"Subject '{subject}' not found.")
                return {"compatibilityLevel": state.levels.pop(subject)}
    raise ApiError(404, 404, "HTTP 404 Not Found")


def _schema_field(body: Any) -> Any:
    if not isinstance(body, dict) or "schema" not in body:
        raise ApiError(422, 42201, "Invalid schema: request body needs a 'schema' field")
    schema_type = body.get("schemaType", "AVRO")
    if schema_type != "AVRO":
        raise ApiError(422, 42201, f"Invalid schema: schemaType {schema_type} is not supported")
    return body["schema"]


def _level(body: Any) -> str:
    level = str(body.get("compatibility", "")).upper() if isinstance(body, dict) else ""
    if level not in LEVELS:
        raise ApiError(
            422,
            42203,
            "Invalid compatibility level. Valid values are none, "
            "backward, forward, full, backward_transitive, forward_transitive, "
            "and full_transitive",
        )
    return level


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, each keep-alive request then
    # waits for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        try:
            body = _body(self) if method in ("POST", "PUT") else None
            status, answer = (
                200,
                _route(self.server.state, method, url.path, parse_qs(url.query), body),
            )
        except ApiError as exc:
            status, answer = exc.status, {"error_code": exc.code, "message": exc.message}
        except Exception as exc:  # a bug here must still answer, as the real registry does
            status, answer = 500, {"error_code": 50001, "message": f"Error in the backend: {exc}"}
        data = orjson.dumps(answer)
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: test output and the local stack's logs are not an access log."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: RegistryState


class RegistryServer:
    """The stand-in registry on a background thread. ``port=0`` picks a free port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = RegistryState()
        self._server = _Server((host, port), _Handler)
        self._server.state = self.state
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> RegistryServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},  # shutdown() waits up to one poll
                name="schema-registry-stand-in",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> RegistryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Confluent Schema Registry stand-in")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args(argv)
    server = RegistryServer(args.host, args.port)
    print(f"schema registry stand-in listening on {server.url}", flush=True)
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()


if __name__ == "__main__":
    main()
