"""Plans: the desired state (desired.py), the typed actions that take live clusters to it, and the findings on the way."""
