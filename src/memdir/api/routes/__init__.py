"""REST routes, one module per area; each handler parses, calls the service, formats."""
