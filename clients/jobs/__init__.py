"""Runnable Spark jobs: `python -m windowstore.clients.jobs.<feeder|periodic|onetime> --help`."""
