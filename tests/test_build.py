"""The authoring pipeline: renders, the --check that catches drift, and execution without noise."""

import functools
import json
import re
import shutil

import nbformat
import pytest

from course_teacher import build, sources
from course_utils import file_names

SOURCE = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] tags=["lang-en"] slideshow={"slide_type": "slide"}
# # A tensor lesson

# %% [markdown] tags=["lang-zh"] slideshow={"slide_type": "slide"}
# # 一节关于张量的课

# %%
import math
import torch
from course_utils import check, setup
setup(lang="en")

# %% tags=["exercise"] exercise="01.scaled_dot"
def attention(q, k, v):
    # lang: en
    """Scaled dot-product attention."""
    # lang: zh
    """缩放点积注意力。"""
    # lang: end
    ### BEGIN SOLUTION
    # lang: en
    scores = q @ k.transpose(-2, -1)  # every query against every key
    # lang: zh
    scores = q @ k.transpose(-2, -1)  # 每个查询与每个键打分
    # lang: end
    weights = torch.softmax(scores / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights
    ### END SOLUTION

# %%
check("01.scaled_dot", attention)
'''


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A throwaway course with one lesson, 99, rendered (not executed) to its four notebooks."""
    (tmp_path / "notebooks" / "source").mkdir(parents=True)
    shutil.copy(build.SOURCES / "glossary.toml", tmp_path / "notebooks" / "source" / "glossary.toml")
    monkeypatch.setitem(file_names.ZH_LESSONS, "99", "演示")  # the table of names has the course's lessons only
    monkeypatch.setitem(file_names.ZH_LESSONS, "98", "第一课")
    for module in (build, sources):  # the build's paths, and the lessons' table below it
        monkeypatch.setattr(module, "ROOT", tmp_path)
        monkeypatch.setattr(module, "NOTEBOOKS", tmp_path / "notebooks")
        monkeypatch.setattr(module, "SOURCES", tmp_path / "notebooks" / "source")
    guide = tmp_path / "guide" / "en.md"  # where the home takes each lesson's time
    guide.parent.mkdir()
    guide.write_text("## The course at a glance\n\n| lesson | in class | at home | exercises |\n| --- | --- | --- | --- |\n"
                     "| 99 · A tensor lesson | 5 min | 5 min | |\n")
    monkeypatch.setattr(build, "GUIDE_TABLE", guide)
    path = tmp_path / "notebooks" / "source" / "99_demo.py"
    path.write_text(SOURCE)
    build.stamp_translations("99")
    render_all(path)
    return path


def render_all(path):
    source = build.jupytext.read(path)
    for lang, solutions, target in build.targets(path):
        build.write(build.render(source, lang, solutions, path.name[:2]), target)


def lesson_only(path):
    """A render read back without the links the build adds first and last (tested on their own below)."""
    notebook = nbformat.read(path, as_version=4)
    assert build.NAV_TAG in notebook.cells[0].metadata["tags"] and build.NAV_TAG in notebook.cells[-1].metadata["tags"]
    notebook.cells = notebook.cells[1:-1]
    return notebook


def problems(path):
    return [str(p) for p in build.check_lesson("99", path)]


def edit_source(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.slow  # (`make quick` runs `build --check` itself, before its tests)
def test_the_repository_passes_its_own_check():
    # the exercises' public data: test_exercises.py compares it (publish.problems), as `make quick`'s
    # `publish --check` does; here it would be computed a second time (8 of the check's 29 CPU-seconds)
    assert build.main(["--check", "--no-public"]) == 0


def test_the_check_leaves_the_public_data_out_only_when_asked(monkeypatch, capsys):
    monkeypatch.setattr(build.publish, "problems", lambda: ["01.x.pt is stale: out"])
    for name in ("check_lesson", "check_home", "check_glossary", "check_learner_text"):
        monkeypatch.setattr(build, name, lambda *args: [])
    assert build.main(["--check", "--no-public"]) == 0
    assert build.main(["--check"]) == 1
    assert "01.x.pt is stale: out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build.main(["--no-public"])


def test_a_fresh_course_has_no_problems(course):
    assert problems(course) == []


def test_renders(course):
    student_en, student_zh, solution_en, solution_zh = (
        lesson_only(target) for _, _, target in build.targets(course)
    )
    # one language's markdown each, shared code, the language swapped into setup()
    assert student_en.cells[0].source == "# A tensor lesson" and student_zh.cells[0].source == "# 一节关于张量的课"
    assert 'setup(lang="zh")' in student_zh.cells[1].source and 'setup(lang="en")' in student_en.cells[1].source
    # the student's exercise is a stub naming the exercise; the solution keeps the answer
    assert 'raise NotImplementedError("exercise 01.scaled_dot")' in student_en.cells[2].source
    assert "# 在这里写你的代码" in student_zh.cells[2].source
    assert '"""Scaled dot-product attention."""' in student_en.cells[2].source
    # code cells keep one language's comments and docstrings, and no block markers
    assert '"""缩放点积注意力。"""' in student_zh.cells[2].source and "Scaled" not in student_zh.cells[2].source
    assert "# 每个查询与每个键打分" in solution_zh.cells[2].source and "every query" in solution_en.cells[2].source
    assert not any("# lang:" in c.source for n in (student_en, solution_zh) for c in n.cells)
    assert "torch.softmax" not in student_en.cells[2].source and "torch.softmax" in solution_zh.cells[2].source
    # tags and slideshow metadata survive; source-only metadata does not
    assert student_en.cells[0].metadata == {"tags": ["lang-en"], "slideshow": {"slide_type": "slide"}}
    assert student_en.cells[2].metadata["tags"] == ["exercise"]
    assert all("en_hash" not in c.metadata and "lines_to_next_cell" not in c.metadata for c in solution_en.cells)
    assert [c.id for c in solution_en.cells] == ["cell-001", "cell-002", "cell-003", "cell-004"]


def test_stale_translation_is_caught(course):
    edit_source(course, "# # A tensor lesson", "# # A tensor lesson, revised")
    found = problems(course)
    assert any("translation is stale" in p and "source cell 1" in p for p in found), found


def test_missing_translation_is_caught(course):
    edit_source(course, '# %% [markdown] tags=["lang-zh"]', '# %% [markdown] tags=["lang-en"]')
    assert any("without its Chinese translation" in p for p in problems(course))


def test_untagged_markdown_is_caught(course):
    edit_source(course, "# %%\nimport math", "# %% [markdown]\n# Stray words\n\n# %%\nimport math")
    assert any("neither a 'lang-en' nor a 'lang-zh' tag" in p for p in problems(course))


def test_glossary_term_missing_from_the_translation_is_caught(course):
    edit_source(course, "# # 一节关于张量的课", "# # 一节课")
    build.stamp_translations("99")
    found = problems(course)
    assert any("'tensor'" in p and "'张量'" in p for p in found), found


def test_exercise_without_check_cell_is_caught(course):
    edit_source(course, '# %%\ncheck("01.scaled_dot", attention)\n', "")
    assert any("has no check cell" in p for p in problems(course))


def test_unregistered_exercise_is_caught(course):
    edit_source(course, 'exercise="01.scaled_dot"', 'exercise="01.nonexistent"')
    assert any("not registered" in p for p in problems(course))


def test_committed_inputs_that_differ_from_the_source_are_caught(course):
    edit_source(course, "import math\n", "import math  # edited\n")
    found = problems(course)
    assert any("notebooks/en/99_demo.ipynb cell 2" in p and "differs from a fresh render" in p for p in found), found


def test_solution_leaking_into_a_student_notebook_is_caught(course):
    _, _, student = build.targets(course)[0]
    notebook = nbformat.read(student, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("    return weights @ v, weights"))
    build.write(notebook, student)
    assert any("solution text in a student notebook" in p for p in problems(course))


def test_a_language_block_whose_parts_run_different_code_is_caught(course):
    edit_source(course, "scores = q @ k.transpose(-2, -1)  # 每个", "scores = k @ q.transpose(-2, -1)  # 每个")
    assert any("run different code" in p and "source cell 3" in p for p in problems(course))


def test_a_language_block_without_its_end_is_caught(course):
    edit_source(course, "    # lang: end\n    weights", "    weights")
    assert any("never reaches '# lang: end'" in p for p in problems(course))


def test_a_line_the_same_in_both_parts_of_a_block_is_caught(course):
    """Blocks hold only what differs, so a maintainer edits each line of code in one place."""
    edit_source(
        course,
        "    # lang: zh\n    scores = q @ k.transpose(-2, -1)  # 每个查询与每个键打分\n",
        "    weights = None\n    # lang: zh\n    scores = q @ k.transpose(-2, -1)  # 每个查询与每个键打分\n    weights = None\n",
    )
    assert any("the same in both languages" in p and "'weights = None'" in p for p in problems(course))


def test_english_a_chinese_learner_would_read_outside_a_block_is_caught(course):
    edit_source(course, "import math\n", "import math  # the square root lives here\n")
    assert any("English outside a '# lang:' block" in p and "square root" in p for p in problems(course))
    edit_source(course, "import math  # the square root lives here\n", 'import math\nprint("two words")\n')
    assert any("English outside a '# lang:' block" in p and "two words" in p for p in problems(course))


def test_comments_that_are_only_shapes_or_pragmas_need_no_translation(course):
    edit_source(course, "import math\n", "import math  # noqa: F401\nSHAPE = (2, 3)  # (B, L_q, d_k)\n")
    build.stamp_translations("99")
    render_all(course)
    assert problems(course) == []


def test_diagrams_are_linked_from_every_render_and_must_exist(course):
    edit_source(course, "# # A tensor lesson", "# # A tensor lesson\n#\n# ![a picture](../../images/99_missing_en.svg)")
    build.stamp_translations("99")
    render_all(course)
    assert any("links images/99_missing_en.svg, which does not exist" in p for p in problems(course))
    (build.ROOT / "images").mkdir()
    (build.ROOT / "images" / "99_missing_en.svg").write_text("<svg/>")
    assert problems(course) == []
    student_en, _, solution_en, _ = (lesson_only(t) for _, _, t in build.targets(course))
    # each render's link reaches images/ from where that notebook lives
    assert "](../../images/99_missing_en.svg)" in student_en.cells[0].source
    assert "](../../../images/99_missing_en.svg)" in solution_en.cells[0].source


def test_stamping_translations_is_idempotent(course):
    before = course.read_text()
    build.stamp_translations("99")
    assert course.read_text() == before


@pytest.mark.slow  # (starts two kernels: not in `make quick`)
def test_execution_leaves_no_noise(tmp_path):
    """Executing the same notebook twice writes the same bytes: no timings, stable widget ids."""
    code = (
        "import time\nimport ipywidgets as w\nfrom course_utils import setup\nsetup()\n"
        "print('one', flush=True)\ntime.sleep(0.2)\nprint('two')\n"  # two chunks of stdout
        "w.IntSlider(value=3, description='n')"
    )
    texts = []
    for run in range(2):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
        notebook.cells[0].id = "cell-000"
        path = build.ROOT / "notebooks" / "en" / "noise_probe.ipynb"  # never written: ids derive from the path
        seconds, peak_mb = build.execute(notebook, path)
        assert 0 < seconds < 60 and 50 < peak_mb < 1536
        texts.append(nbformat.writes(notebook))
    assert texts[0] == texts[1]
    executed = json.loads(texts[0])
    assert "execution" not in executed["cells"][0]["metadata"]
    streams = [o for o in executed["cells"][0]["outputs"] if o["output_type"] == "stream"]
    assert len(streams) == 1 and "".join(streams[0]["text"]) == "one\ntwo\n"
    assert executed["metadata"]["widgets"]  # the widget's state is kept, so it renders without a kernel


@pytest.mark.slow  # (starts a kernel: not in `make quick`)
def test_execution_runs_under_fixed_settings_whatever_the_callers_environment(monkeypatch):
    monkeypatch.setenv("COURSE_THREADS", "2")
    code = "import os, torch\nfrom course_utils import setup\nsetup()\nprint(os.environ['PYTHONHASHSEED'], torch.get_num_threads())"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    build.execute(notebook, build.ROOT / "notebooks" / "en" / "settings_probe.ipynb")
    assert notebook.cells[0].outputs[0]["text"] == "0 1\n"


NBGRADER_ID = r"[A-Za-z0-9_-]+"  # what nbgrader's metadata schema (version 3) allows in a grade_id


def test_every_render_carries_nbgrader_metadata(course):
    """Exercise cells are nbgrader solution cells, check cells locked test cells worth a point."""
    for _, _, target in build.targets(course):
        cells = lesson_only(target).cells
        assert cells[2].metadata["nbgrader"] == {
            "solution": True, "grade": False, "locked": False, "grade_id": "01_scaled_dot-code", "schema_version": 3,
        }
        assert cells[3].metadata["nbgrader"] == {
            "solution": False, "grade": True, "locked": True, "points": 1, "grade_id": "01_scaled_dot",
            "schema_version": 3,
        }
        assert not any("nbgrader" in c.metadata for c in cells[:2])


def test_the_nbgrader_metadata_is_checked_for_drift(course):
    _, _, student = build.targets(course)[0]
    notebook = nbformat.read(student, as_version=4)
    notebook.cells[3].metadata["nbgrader"]["points"] = 5
    build.write(notebook, student)
    assert any("differs from a fresh render" in p for p in problems(course))


@functools.cache
def _lesson_render(lesson, lang, solutions):
    """A lesson's render as the build writes it (its links too), made once for the tests that read the
    renders of every lesson (each rendered all 44 itself, 0.2 CPU-s a render). Only read, never changed."""
    return build.render(build.read_source(build.lessons()[lesson]), lang, solutions, lesson)


def test_every_lessons_exercise_has_one_solution_cell_and_one_test_cell_for_nbgrader():
    for lesson, path in build.lessons().items():
        source = build.read_source(path)
        exercises = [c.metadata["exercise"] for c in source.cells if "exercise" in build.tags(c)]
        for lang, solutions, _ in build.targets(path):
            found = [c.metadata["nbgrader"] for c in _lesson_render(lesson, lang, solutions).cells
                     if "nbgrader" in c.metadata]
            ids = [meta["grade_id"] for meta in found]
            want = [name for exercise in exercises for name in (build.grade_id(exercise) + "-code", build.grade_id(exercise))]
            assert ids == want, (lesson, lang, solutions, ids)
            assert all(re.fullmatch(NBGRADER_ID, i) for i in ids)
            assert [m["grade"] for m in found] == [False, True] * len(exercises)


# ----------------------------------------------------------------------------- links and the course home

def _links(text):
    return re.findall(r"\]\(([^)]+)\)", text)


@pytest.mark.parametrize("solutions", [False, True])
@pytest.mark.parametrize("lang", build.LANGUAGES)
def test_every_lesson_links_the_home_first_and_the_next_lesson_last(lang, solutions):
    found = build.lessons()
    numbers = list(found)
    home = f"../../{lang}/{build.HOMES[lang]}" if solutions else build.HOMES[lang]
    for lesson, path in found.items():
        notebook = _lesson_render(lesson, lang, solutions)
        first, last = notebook.cells[0], notebook.cells[-1]
        assert build.NAV_TAG in first.metadata["tags"] and build.NAV_TAG in last.metadata["tags"]
        assert _links(first.source) == [home]
        assert first.metadata["slideshow"] == {"slide_type": "skip"}  # the decks have no home
        following = numbers[numbers.index(lesson) + 1:]
        if following:
            nxt = build.notebook_name(found[following[0]], lang)  # the next lesson's name in this language
            assert _links(last.source) == [nxt, home], (lesson, last.source)
            title = build.lesson_title(build.read_source(found[following[0]]), lang, following[0])
            assert f"[{following[0]} · {title}]({nxt})" in last.source
        else:
            assert _links(last.source) == [home]
        # the rest is the lesson: the links are added cells, never typed into a source
        assert not any(build.NAV_TAG in c.metadata.get("tags", []) for c in notebook.cells[1:-1])
        assert not re.search(r"\]\((index|首页|\d\d_\w+)\.ipynb\)", path.read_text(encoding="utf-8"))


def test_the_one_lesson_of_a_course_links_home_at_its_end(course):
    source = build.jupytext.read(course)
    for lang in build.LANGUAGES:
        last, home = build.render(source, lang, False, "99").cells[-1], build.HOMES[lang]
        assert _links(last.source) == [home] and build.catalogue(lang, "nav.last", link=home) in last.source
    for lang, solutions, target in build.targets(course):  # renders without their links: check says so
        build.write(build.render(source, lang, solutions), target)
    assert any("differs from a fresh render" in p for p in problems(course))


README_MAP = """# A course

## Course map · 课程地图

| # | Lesson · 课 | What it teaches · 内容 | English | 中文 |
| --- | --- | --- | --- | --- |
| 99 | Demo · 演示 | tensors, briefly · 简述张量 | [en](notebooks/en/99_demo.ipynb) | [zh](notebooks/zh/99_demo.ipynb) |

## Next section
"""


def test_the_home_lists_every_lesson_and_check_catches_a_stale_one(course):
    (build.ROOT / "README.md").write_text(README_MAP)
    assert build.course_map() == {"99": {"en": "tensors, briefly", "zh": "简述张量"}}
    assert [str(p) for p in build.check_home()] == [
        f"lesson home, notebooks/{lang}/{build.HOMES[lang]}: not rendered: run `make notebooks`" for lang in build.LANGUAGES]
    for lang, path in build.homes():
        build.write(build.render_home(lang), path)
    assert build.check_home() == []
    en, zh = (nbformat.read(path, as_version=4) for _, path in build.homes())
    assert "| 99 | [A tensor lesson](99_demo.ipynb) | tensors, briefly | <span style=white-space:nowrap>about 10 min</span> |" in en.cells[1].source
    assert "| 99 | [一节关于张量的课](99_演示.ipynb) | 简述张量 | <span style=white-space:nowrap>约 10 分钟</span> |" in zh.cells[1].source
    assert 'setup(lang="zh")' in zh.cells[3].source and "progress()" in zh.cells[3].source
    # the README's course map changes: the homes are stale
    (build.ROOT / "README.md").write_text(README_MAP.replace("tensors, briefly", "tensors, at length"))
    assert [p for p in map(str, build.check_home()) if "differs from a fresh render" in p]
    (build.ROOT / "README.md").write_text(README_MAP)
    # a new lesson: the homes are stale, and the README must map it
    shutil.copy(course, course.with_name("98_first.py"))
    found = [str(p) for p in build.check_home()]
    assert any("lesson 98, README.md: has no row in the course map" in p for p in found), found
    assert any("notebooks/en/index.ipynb: differs" in p for p in found), found


def test_the_committed_homes_show_no_progress_yet():
    """Executed in notebooks/{en,zh}/, where no work folder is: the state every learner starts from."""
    from course_utils import i18n

    for lang, path in build.homes():
        notebook = nbformat.read(path, as_version=4)
        outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
        assert [o.get("text") for o in outputs] == [i18n.text(lang, "progress.none") + "\n"], path
