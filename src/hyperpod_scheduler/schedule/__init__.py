"""Schedules: parse, compile to transition instants, evaluate. Pure functions; the clock is passed in."""
