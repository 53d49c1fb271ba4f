"""What a connector finds when it connects with a config before the worker stores it.

Kafka Connect validates a connector's config when it is created or changed over REST, and
Debezium's connectors connect to the database as part of that (``validateConnection``): a
wrong password or an unreachable host is a 400 on ``POST /connectors`` rather than a task that
fails afterwards. A connector reports here what it found, keyed by the config key to fix."""

from __future__ import annotations

from dataclasses import dataclass, field

#: (config key, message)
Finding = tuple[str, str]


@dataclass
class ConnectionReport:
    #: the config cannot work: the create or update is refused (the database refused the
    #: login, the host did not answer)
    errors: list[Finding] = field(default_factory=list)
    #: the connection works but something will fail later or behave unexpectedly (a server
    #: not set up for change data capture, a role without replication rights): shown by
    #: ``/validate`` and logged, never fatal, since the operator may fix it before the task
    #: needs it
    warnings: list[Finding] = field(default_factory=list)
