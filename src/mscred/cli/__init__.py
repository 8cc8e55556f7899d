"""The `mscred` command: a thin shell over the library (see main.py)."""
