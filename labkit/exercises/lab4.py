"""Lab 4s exercises."""
