"""The worker's HTTP API: Kafka Connect's REST paths and JSON shapes, plus health, metrics and
an OpenAPI document."""

from worker.rest.app import App, Request, Response
from worker.rest.server import RestServer

__all__ = ["App", "Request", "Response", "RestServer"]
