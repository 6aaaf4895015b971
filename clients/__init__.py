"""Clients of windowstore: the Python SDK (sync and asyncio) and the Spark integration."""
