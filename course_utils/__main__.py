"""`python -m course_utils copy work`: the learner's own copies of the notebooks (course_utils.learner),
what `make lab` runs first. (Through the package rather than `-m course_utils.learner`: the package
imports learner itself, and running an imported module again as a script makes Python warn.)"""

from .learner import main

main()
