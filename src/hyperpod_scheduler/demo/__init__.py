"""The demo: a small fleet on the embedded emulator, scheduled across a simulated week."""
