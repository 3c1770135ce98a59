"""What a running app needs beyond the library: the loaded encoders within a memory budget, request batching, the
port, the public-deployment mode, the hub probe, the JSON route and the warm start."""
