"""Cases transcribed from Volcano's own tests (inputs and expected outcomes)."""
