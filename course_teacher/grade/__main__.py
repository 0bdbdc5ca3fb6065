"""``python -m course_utils.grade SUBMISSIONS``: see course_utils/grade/__init__.py."""

import sys

from .grader import main

sys.exit(main())
