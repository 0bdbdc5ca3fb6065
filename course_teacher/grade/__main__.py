"""``python -m course_teacher.grade SUBMISSIONS``: see course_teacher/grade/__init__.py."""

import sys

from .grader import main

sys.exit(main())
