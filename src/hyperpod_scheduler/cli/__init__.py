"""The command line: a thin Typer layer over library functions."""
