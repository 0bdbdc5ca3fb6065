"""`python -m course_utils copy|update|lab work`: the command line of the learner's folder (course_utils.learner)
and of the course's JupyterLab (course_utils.launch), above both: ``make lab`` and ``make update`` run it through
the package (course_utils/__main__.py)."""

import argparse
import os
import sys
from pathlib import Path

from . import i18n, launch, learner


def locale_language(given):
    """The command's language: `given`, else the locale's (a zh_* LANG is Chinese, as in the Makefile)."""
    if given:
        return given
    return "zh" if os.environ.get("LANG", "").startswith("zh") else "en"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_utils", description=learner.__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    language = dict(choices=i18n.LANGUAGES, help="the language to speak in (default: the locale's, as `make lab`)")
    copy = commands.add_parser("copy", help="copy the course's notebooks into a work folder (never overwriting "
                                            "the learner's) and refresh the homes' progress")
    copy.add_argument("work", help="the work folder, e.g. work")
    copy.add_argument("--lang", **language)
    renew = commands.add_parser("update", help="bring in the lessons the course changed since you copied them, "
                                               "keeping every exercise you changed (your old copy kept beside)")
    renew.add_argument("work", help="the work folder, e.g. work")
    renew.add_argument("--lang", **language)
    renew.add_argument("--only", action="append", metavar="NN", help="just lesson NN (e.g. 01; may be repeated)")
    lab = launch.add_command(commands)
    for command in (copy, renew, lab):  # another course folder than this one's notebooks/ (the tests')
        command.add_argument("--course", type=Path, default=learner.NOTEBOOKS, help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args(argv)
    extra = extra[1:] if extra[:1] == ["--"] else extra
    if extra and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.jupyter = extra
    lang = locale_language(args.lang)
    if args.command == "copy":
        learner.prepare(Path(args.work), lang, args.course)
    elif args.command == "update":
        learner.update(Path(args.work), lang, args.course, only=args.only)
    else:
        return launch.main(args, lang)
    return 0


if __name__ == "__main__":
    sys.exit(main())
