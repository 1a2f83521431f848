"""The command line: one typer app (`app`), one module per subsystem and command group; the only layer that
imports every other."""
