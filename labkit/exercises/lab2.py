"""Lab 2s exercises."""
