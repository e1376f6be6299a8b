"""Small helpers every layer uses: JSON for non-finite numbers, warn-once, secrets
redacted (``redact``), side files read whatever they hold (``side_files``)."""
