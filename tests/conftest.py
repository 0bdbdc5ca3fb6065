"""Every test starts and ends in English, with the course's plot style: a test that switches the
language (or a font) cannot leak into the next one. And `one_thread`, for the modules that ask for it."""

import pytest
import torch

from course_utils import i18n, viz


@pytest.fixture(autouse=True)
def english():
    i18n.set_language("en")
    viz.use_course_style()
    yield
    i18n.set_language("en")


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module's tests, as the notebooks run (and as trained facts are proved);
    restored afterwards. A module that wants it for every test says
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
