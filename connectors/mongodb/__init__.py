"""MongoDB connector (seed chapter 4): change streams or the oplog of one replica set."""

from connectors.mongodb.connector import MongoDbConnector

__all__ = ["MongoDbConnector"]
