"""Cases transcribed from the reference implementations' own tests (inputs and expected outcomes)."""
