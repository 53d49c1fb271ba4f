"""The event pipeline: dispatcher, queue, failure handling, coordination."""
