"""Built-in plugins, one module each (registered by `factory`)."""
