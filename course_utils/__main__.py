"""`python -m course_utils lab|copy|update work`: the learner's own copies of the notebooks
(course_utils.learner) and the course's JupyterLab (course_utils.launch), what `make lab` and
`make update` run. (Through the package rather than `-m course_utils.learner`: the package imports
learner itself, and running an imported module again as a script makes Python warn.)"""

import sys

from .commands import main

sys.exit(main())
