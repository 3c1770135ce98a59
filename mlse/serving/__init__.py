"""What a running app needs beyond the library: warm start (mlse.serving.warm), serving helpers."""
