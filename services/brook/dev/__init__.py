"""`brook dev up`: a local cluster for development, with sensible defaults."""
