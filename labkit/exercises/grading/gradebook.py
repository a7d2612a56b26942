"""What ``labkit grade`` writes into ``--out``: ``grades.csv`` (a row per student), ``answers.csv`` (every written
answer, for manual marking), ``grading.json`` (the seed and settings: staff-only), and per student
``students/<id>/results.json`` (Gradescope's autograder format: public cases visible, hidden ones after the due
date) and ``students/<id>/feedback.md`` (the lines ``check`` prints; hidden cases counted, their inputs not shown).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from ..check import case_lines
from .grader import FLAGS, Graded, StudentGrade

OUTPUT_SHOWN = 1500


def _exercise_ids(grades: list[StudentGrade]) -> list[str]:
    seen = []
    for s in grades:
        for g in s.exercises:
            if g.id not in seen:
                seen.append(g.id)
    return seen


def flag_column(student: StudentGrade, flag: str) -> str:
    """The exercises (or, for a missing notebook, the notebooks) a flag applies to, space-separated."""
    if flag == "notebook missing":
        return " ".join(stem for stem, nb in student.notebooks.items() if nb.path is None)
    return " ".join(g.id for g in student.exercises if flag in g.flags)


def write_grades(grades: list[StudentGrade], path: Path) -> None:
    ids = _exercise_ids(grades)
    points = {g.id: g.points for s in grades for g in s.exercises}
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", *ids, "total", "max", *FLAGS, "problems"])
        for s in grades:
            by_id = {g.id: g for g in s.exercises}
            w.writerow([s.id, *(f"{by_id[i].score:g}" if i in by_id else "" for i in ids), f"{s.total:g}",
                        sum(points[i] for i in ids), *(flag_column(s, fl) for fl in FLAGS), " | ".join(s.problems)])


def write_answers(grades: list[StudentGrade], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "question", "points", "answered", "text"])
        for s in grades:
            for stem, nb in s.notebooks.items():
                for q, pts, text in nb.answers:
                    w.writerow([s.id, stem, q, pts, "yes" if text else "no", text])


def _split(g: Graded) -> tuple[float, float, float, float]:
    """(public score, public max, hidden score, hidden max): the exercise's points shared by case count."""
    pub_ok, pub, hid_ok, hid = g.passed
    total = pub + hid
    pub_max = round(g.points * pub / total, 4) if total else g.points
    hid_max = round(g.points - pub_max, 4)
    if g.status == "uses labkit's implementation" or not total:
        return 0.0, pub_max, 0.0, hid_max
    return round(g.points * pub_ok / total, 4), pub_max, round(g.points * hid_ok / total, 4), hid_max


def _header(g: Graded) -> list[str]:
    flags = [f for f in g.flags if f != g.status]
    lines = [f"status: {g.status}" + (f" ({', '.join(flags)})" if flags else "")]
    if g.detail:
        lines.append(g.detail)
    return lines


def gradescope(student: StudentGrade) -> dict:
    tests = []
    for g in student.exercises:
        pub_score, pub_max, hid_score, hid_max = _split(g)
        pub_ok, pub, hid_ok, hid = g.passed
        public_lines = _header(g) + [f"{pub_ok} of {pub} public cases pass"] + \
            [case_lines(c) for c in g.cases if not c.hidden]
        tests.append({"name": f"{g.id}: public cases", "number": f"{g.id}.public", "score": pub_score,
                      "max_score": pub_max, "status": "passed" if pub_score == pub_max else "failed",
                      "output": "\n".join(public_lines), "visibility": "visible", "tags": [g.notebook]})
        tests.append({"name": f"{g.id}: hidden cases", "number": f"{g.id}.hidden", "score": hid_score,
                      "max_score": hid_max, "status": "passed" if hid_score == hid_max else "failed",
                      "output": "\n".join(_header(g) + [f"{hid_ok} of {hid} hidden cases pass"]),
                      "visibility": "after_due_date", "tags": [g.notebook]})
    missing = [stem for stem, nb in student.notebooks.items() if nb.path is None]
    text = f"labkit grade: {student.total:g} points from the exercises; written answers are marked by hand."
    if missing:
        text += f" Notebooks missing: {', '.join(missing)}."
    return {"score": student.total, "output": text, "visibility": "visible", "stdout_visibility": "hidden",
            "tests": tests}


def feedback(student: StudentGrade) -> str:
    out = [f"# Feedback for {student.id}", "",
           f"Exercises: **{student.total:g}** points. Hidden cases are counted, their inputs are not shown.", ""]
    for stem, nb in student.notebooks.items():
        out.append(f"## {stem}" + (f" ({nb.path})" if nb.path else " (missing: 0 points)"))
        out.append("")
        for g in nb.exercises:
            pub_ok, pub, hid_ok, hid = g.passed
            out.append(f"### {g.id}: {g.score:g} of {g.points} points")
            out += [""] + [f"- {line}" for line in _header(g)]
            if g.status == "graded":
                out.append(f"- {pub_ok} of {pub} public cases pass; {hid_ok} of {hid} hidden cases pass")
                out += ["", "```text", *[case_lines(c) for c in g.cases if not c.hidden], "```"]
            if g.output:
                shown = g.output[:OUTPUT_SHOWN] + ("\n... (cut)" if len(g.output) > OUTPUT_SHOWN else "")
                out += ["", "What your code printed:", "", "```text", shown.replace("```", "'''"), "```"]
            out.append("")
        answered = [q for q, _, text in nb.answers if text]
        if nb.answers:
            out.append(f"Written answers: {len(answered)} of {len(nb.answers)} answered (marked by hand).")
            out.append("")
    if student.problems:
        out += ["## Files not graded", ""] + [f"- {p}" for p in student.problems] + [""]
    return "\n".join(out)


def write(grades: list[StudentGrade], out: Path, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_grades(grades, out / "grades.csv")
    write_answers(grades, out / "answers.csv")
    for s in grades:
        folder = out / "students" / s.id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(gradescope(s), indent=1) + "\n")
        (folder / "feedback.md").write_text(feedback(s))
    (out / "grading.json").write_text(json.dumps(meta, indent=1) + "\n")
