"""Reports: terminal, JSON, Markdown, HTML."""
