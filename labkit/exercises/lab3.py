"""Lab 3s exercises."""
