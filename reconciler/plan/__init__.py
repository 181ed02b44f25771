"""Plans: the typed actions that take live clusters to the desired state, and the findings on the way."""
