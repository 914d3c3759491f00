"""Cases transcribed from the reference implementations' own tests."""
