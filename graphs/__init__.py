"""Graph definitions (one package each), the registry and the runner."""
