"""The run folder: its layout and names, its ``run.json``, its ranks, and what closes
it at exit or on SIGTERM."""
