"""What the grader writes (course_teacher.grade.gradebook): the gradebook against hostile names,
hostile messages, planted files, and a grader killed mid-run.

Each case is a finding of the security review, run here and shown fixed. The graded submissions
are built here (the attributes grader.py's Graded and Row have), from folders of small notebooks
where the finding is about what the walk finds; nothing runs a kernel.
"""

import csv
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import patience
import pytest

from course_teacher.grade import gradebook, submission
from course_teacher.grade.gradebook import MANIFEST, Gradebook, write


@dataclass
class Row:
    exercise: str
    status: str
    code: str
    message: str
    points: int
    max_points: int


@dataclass
class Graded:
    key: str
    student: str
    lesson: str = "00"
    lang: str = "en"
    notebook: str = None
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    review: list = field(default_factory=list)

    def __post_init__(self):
        self.notebook = self.notebook or self.key + ".ipynb"
        if not self.rows:
            self.rows = [Row("00.padding_mask", "passed", "", "✅ 00.padding_mask: passed on 6 test cases.", 1, 1),
                         Row("00.split_heads", "failed", "NO_TRANSPOSE", "❌ 00.split_heads: not yet. Diagnosis: "
                             "NO_TRANSPOSE. Use `x.transpose(1, 2)`.\nHint: a second paragraph.", 0, 1)]

    @property
    def score(self):
        return sum(row.points for row in self.rows)

    @property
    def max_score(self):
        return sum(row.max_points for row in self.rows)


def _graded(found):
    """A Graded for each (path, key, student) that find returned."""
    return [Graded(key, student, notebook=Path(path).name if "/" not in key else key + ".ipynb")
            for path, key, student in found]


def _files(out):
    """Every file and link under `out`, relative, as POSIX paths (the manifest left out)."""
    return sorted(p.relative_to(out).as_posix() for p in Path(out).rglob("*")
                  if (p.is_file() or p.is_symlink()) and p.name != MANIFEST)


def _csv(out):
    return list(csv.DictReader(io.StringIO((Path(out) / "grades.csv").read_text(encoding="utf-8"))))


def _notebook(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))


# ----------------------------------------------------------------------------- stale files

def test_a_notebook_named_result_json_and_planted_files_do_not_break_the_cleanup(tmp_path, caplog):
    """Finding: a notebook named result.json.ipynb made every full run crash in the stale-file
    cleanup (it rglob'd result.json and unlinked a folder: IsADirectoryError), keeping stale and
    planted files. Now its folder gets a safe name, the cleanup removes only the files the
    previous run's manifest lists, and planted files and folders stay."""
    root, out = tmp_path / "submissions", tmp_path / "grades"
    for path in ("alice/00_x.ipynb", "bob/00_x.ipynb", "result.json.ipynb", "feedback.md.ipynb",
                 "grades.csv.ipynb", "alice/result.json.ipynb"):
        _notebook(root / path)
    found = submission.find(root, skip=out)
    assert [f.key for f in found] == ["alice/00_x", "alice/result.json", "bob/00_x", "feedback.md", "grades.csv",
                                      "result.json"]
    # planted before the first run: a folder named result.json, files named like the gradebook's
    (out / "result.json" / "inside").mkdir(parents=True)
    (out / "planted" / "result.json").mkdir(parents=True)
    (out / "planted" / "feedback.md").write_text("planted")
    (out / "feedback.md").write_text("planted")
    write(_graded(found), out)
    first = _files(out)
    assert "grades.csv" in first and "feedback.md" in first and "planted/feedback.md" in first
    keys = {row["submission"] for row in _csv(out)}
    assert keys == {f.key + ".ipynb" for f in found}
    for key in ("result.json", "alice/result.json", "grades.csv", "feedback.md"):
        folder = gradebook.safe_folder(key)
        assert folder != key and folder.split("/")[-1].startswith(key.split("/")[-1] + "~")
        assert json.loads((out / folder / "result.json").read_text())["max-score"] == 2
    # bob and the root notebooks went away; a folder named result.json is planted where bob's file was
    for path in ("bob/00_x.ipynb", "result.json.ipynb", "feedback.md.ipynb", "grades.csv.ipynb"):
        (root / path).unlink()
    (out / "alice" / "00_x" / "result.json").unlink()
    (out / "alice" / "00_x" / "result.json").mkdir()  # in the way of alice's own file, too
    write(_graded(submission.find(root, skip=out)), out)  # neither crashes nor raises
    files = _files(out)
    assert not [f for f in files if f.startswith(("bob/", "result.json~", "feedback.md~", "grades.csv~"))]
    assert not (out / "bob").exists(), "the folders the grader made for bob are removed once empty"
    assert (out / "result.json" / "inside").is_dir() and (out / "planted" / "result.json").is_dir()
    assert (out / "planted" / "feedback.md").read_text() == "planted" == (out / "feedback.md").read_text()
    assert (out / "alice" / "00_x" / "result.json").is_dir() and (out / "alice" / "00_x" / "feedback.md").is_file()
    assert (out / gradebook.safe_folder("alice/result.json") / "result.json").is_file()
    assert "could not be written" in caplog.text  # alice's result.json: logged, not fatal
    assert {row["submission"] for row in _csv(out)} == {"alice/00_x.ipynb", "alice/result.json.ipynb"}


@pytest.mark.slow  # the grader's command, twice (39 s on a loaded 2-core machine): not in `make quick`
def test_a_full_run_survives_result_json_notebooks_pipes_and_planted_folders(tmp_path, monkeypatch):
    """The same finding through the grader's command: two runs over a folder holding
    result.json.ipynb, a pipe named x.ipynb and, in out, a planted folder named result.json. The
    notebooks carry no lesson (no kernel starts); each run finishes, exit code 0, and the second
    removes the files of the submission that went away."""
    import threading

    from course_teacher.grade import grader

    root, out = tmp_path / "submissions", tmp_path / "grades"
    for path in ("alice/notes.ipynb", "bob/notes.ipynb", "result.json.ipynb"):
        path = root / path
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("notes")]), str(path))
    os.mkfifo(root / "x.ipynb")
    # no notebook of any lesson: nothing to judge, so no answer key is written (a minute of CPU saved)
    monkeypatch.setattr(grader, "write_answers", lambda *args: pytest.fail("an answer key was written"))
    (out / "planted" / "result.json").mkdir(parents=True)
    (out / "result.json").mkdir()

    def run():
        codes = []
        thread = threading.Thread(target=lambda: codes.append(grader.main([str(root), "--out", str(out)])), daemon=True)
        thread.start()
        assert patience.join(thread, 120), "the grader blocked"  # 120 s on a quiet machine (tests/patience.py)
        return codes

    assert run() == [0]
    assert {r["submission"] for r in _csv(out)} == {"alice/notes.ipynb", "bob/notes.ipynb", "result.json.ipynb",
                                                     "x.ipynb"}
    (root / "bob" / "notes.ipynb").unlink()
    (root / "result.json.ipynb").unlink()
    assert run() == [0]
    assert {r["submission"] for r in _csv(out)} == {"alice/notes.ipynb", "x.ipynb"}
    assert _files(out) == ["alice/notes/feedback.md", "alice/notes/result.json", "grades.csv", "x/feedback.md",
                           "x/result.json"]
    assert (out / "planted" / "result.json").is_dir() and (out / "result.json").is_dir()


def test_the_cleanup_removes_only_regular_files_inside_out(tmp_path):
    """A forged or stale manifest cannot make the cleanup remove anything but regular files it
    reaches inside out without following a link: not ../, not an absolute path, not a file
    behind a link, not a link, not a folder."""
    out, outside = tmp_path / "grades", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    out.mkdir()
    (out / "linked").symlink_to(outside)
    (out / "link.md").symlink_to(outside / "keep.txt")
    (out / "folder").mkdir()
    (out / "stale").mkdir()
    (out / "stale" / "feedback.md").write_text("old")
    listed = ["../outside/keep.txt", str(outside / "keep.txt"), "linked/keep.txt", "link.md", "folder",
              "stale/feedback.md", "./x", "a//b", "\ud800", 7, None]
    (out / MANIFEST).write_text(json.dumps({"format": gradebook.MANIFEST_FORMAT, "files": listed,
                                            "folders": ["linked", "stale", ".."]}))
    book = Gradebook(out)
    book.close()
    assert (outside / "keep.txt").read_text() == "keep"
    assert (out / "linked").is_symlink() and (out / "link.md").is_symlink() and (out / "folder").is_dir()
    assert not (out / "stale").exists(), "a stale regular file and then its empty folder are removed"
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["complete"] is True and manifest["files"] == ["grades.csv"] and manifest["folders"] == []
    assert any("entries of 'files' ignored" in problem for problem in book.problems)


@pytest.mark.parametrize("manifest", ["not json", "[1, 2]", '{"format": "other", "files": ["grades.csv"]}', "link", "folder"])
def test_a_broken_manifest_is_a_warning_and_removes_nothing(tmp_path, manifest):
    out = tmp_path / "grades"
    (out / "a").mkdir(parents=True)
    (out / "a" / "result.json").write_text("{}")
    if manifest == "link":
        (out / MANIFEST).symlink_to(out / "a" / "result.json")
    elif manifest == "folder":
        (out / MANIFEST).mkdir()
    else:
        (out / MANIFEST).write_text(manifest)
    book = Gradebook(out)
    book.close()
    assert (out / "a" / "result.json").read_text() == "{}"
    if manifest != "folder":
        assert book.problems and "nothing an earlier run wrote is removed" in book.problems[0]


# ----------------------------------------------------------------------------- grades.csv

def test_a_formula_student_id_is_escaped_in_grades_csv(tmp_path):
    """Finding: a student folder named =cmd|' -C calc'!A0 went into grades.csv as it was, a
    formula for a spreadsheet. Now every cell that starts like a formula gets a leading '."""
    root, out = tmp_path / "submissions", tmp_path / "grades"
    _notebook(root / "=cmd|' -C calc'!A0" / "00_x.ipynb")
    _notebook(root / "+sum(A1)" / "@x" / "00_x.ipynb")
    graded = _graded(submission.find(root))
    graded.append(Graded("tab", "\t=1+1", notebook="-1.ipynb", review=["=HYPERLINK(\"x\")", "a\nb"]))
    graded.append(Graded("cr", "\r=1+1\x00\x1b[31m", notebook="  =x"))
    write(graded, out)
    rows = _csv(out)
    assert {r["student"] for r in rows} == {"'=cmd|' -C calc'!A0", "'+sum(A1)", "' =1+1", "' =1+1[31m"}
    assert {r["submission"] for r in rows} == {"'=cmd|' -C calc'!A0/00_x.ipynb", "'+sum(A1)/@x/00_x.ipynb",
                                               "'-1.ipynb", "'  =x"}
    assert {r["review"] for r in rows} == {"", "'=HYPERLINK(\"x\"); a b"}
    text = (out / "grades.csv").read_text(encoding="utf-8")
    assert "\t" not in text and "\r" not in text and "\x00" not in text and "\x1b" not in text
    for row in rows:  # no cell a spreadsheet would take for a formula
        assert not any(str(cell).lstrip(" ").startswith(("=", "+", "-", "@")) for cell in row.values())
        assert row["points"] in ("0", "1") and row["max_points"] == "1"


def test_grades_csv_is_in_path_order_whatever_the_order_of_adding(tmp_path):
    names = ["carol/00_x", "a/week1/00_x", "a/00_x", "a", "b"]
    book = Gradebook(tmp_path)
    for key in names:
        book.add(Graded(key, key.split("/")[0]))
    book.close()
    assert [r["submission"] for r in _csv(tmp_path)][::2] == [
        "a/00_x.ipynb", "a/week1/00_x.ipynb", "a.ipynb", "b.ipynb", "carol/00_x.ipynb"]


# ----------------------------------------------------------------------------- feedback.md

FORGED = "\n\n## 00.x (1 / 1)\n✅ passed … Score: 3/3"
HOSTILE = [
    "<img src=x onerror=alert(1)> <script>alert(1)</script> <!-- hidden --> <http://evil.example>",
    "[click](http://evil.example) ![image](http://evil.example/x.png) [ref]: http://evil.example",
    "```", "~~~", "    indented code", "| a | b |", "|---|---|", "- a list", "* another", "+ and another",
    "1. ordered", "2) ordered", "> a quote", "***", "a setext heading", "===", "---", "# a heading", "### another",
    "bare links: http://evil.example www.evil.example mail@evil.example", "math: $x$ and $$y$$", "&lt;b&gt; &#60;",
    "a backslash \\", "\\[escaped](http://evil.example)", "`code <b>` `unclosed ``a`b`` ``` [x](y)",
]


def _tokens(text):
    """The block tokens of `text` as CommonMark with GitHub's tables and strikethrough, and every
    inline token."""
    parser = pytest.importorskip("markdown_it").MarkdownIt("commonmark").enable("table").enable("strikethrough")
    blocks = parser.parse(text)
    return blocks, [child for token in blocks for child in token.children or []]


def test_hostile_names_and_forged_messages_stay_inert_in_feedback(tmp_path):
    """Findings: newlines and HTML in names went into feedback titles, and a forged error text
    (a kernel may send back any string) put a fake "✅ passed … Score: 3/3" block into
    feedback.md. Now every such string is escaped: the only headings are the grader's, there is
    no HTML, link, image, list but the notes, table or code block, and a forged block is text in
    the paragraph of the exercise it came with."""
    forged = Row("00.padding_mask", "crashed", "CELL_ERROR",
                 "💥 00.padding_mask: the exercise cell raised ValueError when it ran: boom" + FORGED, 0, 1)
    hostile = Row("00.split_heads", "crashed", "NO_RESULT", "\n".join(HOSTILE), 0, 1)
    graded = Graded("alice/00_x", "alice\n# Score: 3/3 <b>html</b> [link](http://evil.example)",
                    notebook="alice/00_x](http://evil.example)\n## x.ipynb", rows=[forged, hostile],
                    notes=["Cell 3 (`x = t[0]`) raised KeyError: 'a'" + FORGED, *HOSTILE[:3]],
                    review=["<script>", "torch.allclose", "[x](http://evil.example)\n# y"])
    write([graded], tmp_path)
    text = (tmp_path / "alice/00_x/feedback.md").read_text(encoding="utf-8")
    lines = text.split("\n")
    headings = [line for line in lines if line.startswith("#")]
    assert headings == ["# Feedback on alice/00_x\\](http:\\/\\/evil.example) ## x.ipynb",
                        "## 00.padding_mask (0 / 1)", "## 00.split_heads (0 / 1)", "## Notes"]
    assert not re.search(r"<[A-Za-z/!?]", text.replace("`code <b>`", "")), "no HTML, no autolink (but in a code span)"
    blocks, inlines = _tokens(text)
    kinds = {t.type for t in blocks} | {t.type for t in inlines}
    assert not kinds & {"html_block", "html_inline", "link_open", "image", "fence", "code_block", "table_open",
                        "blockquote_open", "ordered_list_open", "hr", "lheading_open"}, kinds
    assert [t.tag for t in blocks if t.type == "heading_open"] == ["h1", "h2", "h2", "h2"]
    assert sum(t.type == "list_item_open" for t in blocks) == 4, "the notes' items, only"
    assert [t.type for t in blocks].count("bullet_list_open") == 1
    # and as another parser with GitHub's extensions (tables, bare links, footnotes, math, task lists), raw HTML allowed
    mistune = pytest.importorskip("mistune")
    html = mistune.create_markdown(escape=False, plugins=["table", "url", "strikethrough", "footnotes", "math",
                                                          "task_lists"])(text)
    assert set(re.findall(r"<([a-z0-9]+)", html)) == {"h1", "h2", "p", "ul", "li", "code"}
    # GitHub also links bare addresses: none is left whole
    assert "://" not in text and "www." not in text and "l@e" not in text
    # the forged block is inert text, on its own lines, inside the padding_mask section
    start, end = lines.index("## 00.padding_mask (0 / 1)"), lines.index("## 00.split_heads (0 / 1)")
    assert "\\## 00.x (1 / 1)" in lines[start:end] and "✅ passed … Score: 3/3" in lines[start:end]
    # one-line fields stayed on one line: the summary holds all of the student id
    summary = next(line for line in lines if line.startswith("Student: "))
    assert "alice # Score: 3/3 &lt;b>html&lt;/b> [link\\](http:\\/\\/evil.example) · lesson 00" in summary
    # the grader's own Markdown is untouched: code spans, and a verdict's own paragraphs
    assert "Cell 3 (`x = t[0]`) raised KeyError" in text and "`code <b>`" in text
    clean = Graded("bob/00_x", "bob")
    clean.rows.append(Row("00.merge_heads", "failed", "", "❌ 00.merge_heads: not yet. Case 2 (lengths [3, 5], "
                          "max_len = 6): True where position < length (not <=); 2 * 3 = 6, a_b (x) [y] | z.", 0, 1))
    write([clean], tmp_path / "clean")
    assert (tmp_path / "clean/bob/00_x/feedback.md").read_text(encoding="utf-8") == "\n".join([
        "# Feedback on bob/00_x.ipynb", "", "Student: bob · lesson 00 · score 1 / 3", "",
        "## 00.padding_mask (1 / 1)", "", "✅ 00.padding_mask: passed on 6 test cases.", "",
        "## 00.split_heads (0 / 1)", "", "❌ 00.split_heads: not yet. Diagnosis: NO_TRANSPOSE. Use `x.transpose(1, 2)`.",
        "Hint: a second paragraph.", "", "## 00.merge_heads (0 / 1)", "", clean.rows[2].message.replace("|", "\\|"), ""])


def test_feedback_is_in_the_notebooks_language(tmp_path):
    write([Graded("dan/00_x", "dan", lang="zh", notes=["一条说明"], review=["torch.allclose"])], tmp_path)
    text = (tmp_path / "dan/00_x/feedback.md").read_text(encoding="utf-8")
    assert text.startswith("# dan/00_x.ipynb 的反馈\n\n学生：dan · 第 00 课 · 得分 1 / 2")
    assert text.endswith("## 说明\n\n- 一条说明\n")


# ----------------------------------------------------------------------------- result.json

def test_result_json_is_valid_and_stripped_of_control_characters(tmp_path):
    row = Row("", "crashed", "UNREADABLE\x07", "line one\x1b[31m\r\nline two\x00\u202e", 0, 0)
    graded = Graded("x\ny", "s", rows=[row])
    write([graded], tmp_path)
    result = json.loads((tmp_path / gradebook.safe_folder("x\ny") / "result.json").read_text(encoding="utf-8"))
    assert result == {"schema": "classroom50/result/v1", "score": 0, "max-score": 0, "tests": [
        {"test-name": "x y", "passed": False, "score": 0, "max-score": 0, "status": "crashed",
         "mistake": "UNREADABLE", "message": "line one[31m\nline two"}]}


# ----------------------------------------------------------------------------- writing as it goes

def test_a_grader_killed_mid_run_leaves_a_valid_gradebook_of_what_finished(tmp_path):
    """Finding: killing the grader left no gradebook at all (everything was written at the end).
    Now each submission is written as it is added; after two of three adds the gradebook holds
    exactly those two, and a later run still knows the files of the run that was killed."""
    out = tmp_path / "grades"
    write([Graded("old/00_x", "old")], out)  # an earlier, finished run
    book = Gradebook(out)
    assert _csv(out) == [], "a run in progress lists only what it finished"
    book.add(Graded("b/00_x", "b"))
    book.add(Graded("a/00_x", "a"))
    # killed here: no close()
    rows = _csv(out)
    assert [(r["student"], r["exercise"]) for r in rows] == [
        ("a", "00.padding_mask"), ("a", "00.split_heads"), ("b", "00.padding_mask"), ("b", "00.split_heads")]
    for key in ("a/00_x", "b/00_x"):
        assert json.loads((out / key / "result.json").read_text())["score"] == 1
        assert (out / key / "feedback.md").read_text().startswith("# Feedback on")
    assert not (out / "c").exists()
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["complete"] is False and "old/00_x/result.json" in manifest["files"]
    assert not [p for p in out.rglob("*.part")], "no temporary file left"
    # the next run, of a alone, removes b's files and old's, which the killed run never removed
    write([Graded("a/00_x", "a")], out)
    assert _files(out) == ["a/00_x/feedback.md", "a/00_x/result.json", "grades.csv"]
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a", "grades.csv"]


def test_adding_from_several_threads_writes_every_submission(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    book = Gradebook(tmp_path)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(book.add, [Graded(f"s{i:02d}/00_x", f"s{i:02d}") for i in range(20)]))
    book.close()
    assert [r["student"] for r in _csv(tmp_path)][::2] == [f"s{i:02d}" for i in range(20)]


# ----------------------------------------------------------------------------- safe paths

def test_output_paths_stay_inside_out_and_never_collide(tmp_path):
    """A key's parts with .., leading dots, 300 characters, unsafe characters, and ids that
    sanitize to the same name: every folder is inside out, each part at most 255 bytes, and no
    two submissions share one."""
    out = tmp_path / "grades"
    keys = ["../../escaped/00_x", "../x", "..", ".", ".hidden/00_x", "a" * 300 + "/00_x", "a" * 301 + "/00_x",
            "张" * 300, "a?b/00_x", "a*b/00_x", "a_b/00_x", "a_b~0123456789ab/00_x", "/abs/00_x", "abs/00_x",
            "a//b", "a/b", "-rf", " x", "x ", "x\ny", "x\x00y", "Result.JSON", "con", "\udcff/00_x"]
    write([Graded(key, "s") for key in keys], out)
    folders = [gradebook.safe_folder(key) for key in keys]
    assert len(set(folders)) == len(keys)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "x").exists()
    for key, folder in zip(keys, folders):
        path = out / folder
        assert path.resolve().is_relative_to(out.resolve()) and (path / "result.json").is_file()
        assert all(0 < len(part.encode()) <= 255 and not part.startswith((".", "-", " ")) for part in folder.split("/"))
        assert json.loads((path / "result.json").read_text(encoding="utf-8"))["score"] == 1
    assert gradebook.safe_folder("alice/00_tensor_shapes") == "alice/00_tensor_shapes"  # safe keys unchanged
    assert gradebook.safe_folder("张三/00_x") == "张三/00_x"


def test_a_link_planted_in_out_is_not_written_through(tmp_path, caplog):
    """The kernels run as the grader's user: one may plant a link where a submission's folder
    goes. The gradebook opens each folder without following links: nothing is written outside."""
    out, outside = tmp_path / "grades", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    (out / "alice").symlink_to(outside)
    (out / "bob").mkdir()
    (out / "bob" / "00_x").symlink_to(outside)
    write([Graded("alice/00_x", "alice"), Graded("bob/00_x", "bob"), Graded("carol/00_x", "carol")], out)
    assert list(outside.iterdir()) == []
    assert (out / "carol/00_x/result.json").is_file()
    assert [r["student"] for r in _csv(out)][::2] == ["alice", "bob", "carol"]
    assert caplog.text.count("could not be written") == 2
