"""Snapshots: the driver that runs every connector's snapshot steps in order."""
