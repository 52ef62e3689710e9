"""Dataset-card templates (Jinja2) and per-source prose."""
