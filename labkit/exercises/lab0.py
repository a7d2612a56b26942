"""Lab 0s exercises."""
