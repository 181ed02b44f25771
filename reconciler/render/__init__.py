"""Renderers: turn data (topologies, plans, reports) into text, JSON, Markdown, Mermaid, DOT, HTML."""
