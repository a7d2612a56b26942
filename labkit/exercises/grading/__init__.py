"""Staff-side grading: ``labkit grade SUBMISSIONS --out DIR`` grades a class of submitted notebooks.

It sits with the exercises it grades. ``submissions`` finds each student's notebooks and the cells that count; ``runtime`` starts the clean
interpreters the student's code runs in (``labkit.sandbox``); ``grader`` computes every case and its expected
value here, from labkit's oracle, and compares what came back; ``gradebook`` writes what staff and students read.
"""
