"""The thin shell: gRPC service, the driver that owns the pure core, config and the CLI."""
