"""The README's course map links both notebooks of every lesson, and every notebook it links exists."""

import re

from course_teacher import build


def test_the_readme_maps_every_lesson_to_its_notebooks():
    readme = (build.ROOT / "README.md").read_text()
    links = set(re.findall(r"\]\((notebooks/[^)]+\.ipynb)\)", readme))
    for lesson, source in build.lessons().items():
        for lang in ("en", "zh"):
            link = f"notebooks/{lang}/{build.notebook_name(source, lang)}"
            assert link in links, f"README's course map has no {lang} link for lesson {lesson}"
    missing = sorted(link for link in links if not (build.ROOT / link).exists())
    assert not missing, f"README links to notebooks that do not exist: {missing}"
