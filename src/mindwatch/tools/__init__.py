"""Tools that work on run folders after (or while) they are written, for the CLI.

Nothing here imports MindSpore: the tools run wherever the run folders are, including
machines without it.
"""
