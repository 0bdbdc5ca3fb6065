"""Every test starts and ends in English, with the course's plot style: a test that switches the
language (or a font) cannot leak into the next one."""

import pytest

from course_utils import i18n, viz


@pytest.fixture(autouse=True)
def english():
    i18n.set_language("en")
    viz.use_course_style()
    yield
    i18n.set_language("en")
