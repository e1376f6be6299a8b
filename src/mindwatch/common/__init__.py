"""Small helpers every layer uses: JSON for non-finite numbers, warn-once."""
