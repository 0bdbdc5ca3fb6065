import sys

from course_teacher.platforms import main

sys.exit(main())
