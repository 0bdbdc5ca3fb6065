"""``setup``: the first code call of every notebook, so that every run prints the same things."""

import os
import random

import numpy as np
import torch

from . import i18n, viz
from . import validation as check

#: Threads torch may use. One by default, so results and timings match a 1-CPU Binder;
#: the tests set COURSE_THREADS=2 to prove the printed outputs do not depend on it.
THREADS_VARIABLE = "COURSE_THREADS"


def setup(lang="en", seed=0):
    """Seed every generator, pin torch's threads, set print options and the plot style and font,
    and make `lang` ("en" or "zh") the language of everything the package says. `seed`: an int
    from 0 to 2**32 − 1, the seeds NumPy takes (torch and Python take more)."""
    check.whole_number("setup", "seed", seed, 0, 2**32 - 1)  # before anything changes
    i18n.set_language(lang)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(int(os.environ.get(THREADS_VARIABLE, "1")))
    # four decimals are enough to read and few enough to be the same on every machine
    torch.set_printoptions(precision=4, sci_mode=False)
    np.set_printoptions(precision=4, suppress=True)
    viz.use_course_style()
