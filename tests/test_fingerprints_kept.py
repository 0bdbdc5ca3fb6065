"""The course's fingerprint table (publish.course_fingerprints, in every answer key) is computed once per state
of the code it reads and read back after: a change to any file it reads computes it again, and the table of an
older state is removed."""

from course_teacher import publish


def test_the_table_is_computed_once_per_state_of_the_code(tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "FINGERPRINTS", tmp_path / "kept")
    lesson = tmp_path / "99_a_lesson.py"
    lesson.write_text("# one state\n")
    monkeypatch.setattr(publish.sources, "lessons", lambda: {"99": lesson})
    computed = []

    def compute():
        computed.append(lesson.read_text())
        return {"statements:a,b": f"course_utils.made_from {lesson.read_text()!r}"}

    monkeypatch.setattr(publish, "compute_course_fingerprints", compute)
    first = publish.course_fingerprints()
    assert publish.course_fingerprints() == first and len(computed) == 1  # read back, not computed again
    lesson.write_text("# another state\n")
    second = publish.course_fingerprints()
    assert second != first and len(computed) == 2
    assert publish.course_fingerprints() == second and len(computed) == 2
    assert len(list((tmp_path / "kept").glob("*.json"))) == 1  # the older state's table is gone


def test_an_unreadable_table_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "FINGERPRINTS", tmp_path / "kept")
    monkeypatch.setattr(publish, "compute_course_fingerprints", lambda: {"statements:c": "course_utils.x"})
    publish.course_fingerprints()
    (kept,) = (tmp_path / "kept").glob("*.json")
    kept.write_text("{ cut off")
    assert publish.course_fingerprints() == {"statements:c": "course_utils.x"}
