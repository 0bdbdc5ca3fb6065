"""The gradebook: what the grader writes under ``--out``, written as each submission finishes.

- ``grades.csv``: a row per submission and exercise, every submission added so far, in path
  order. A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
  leading ``'`` (OWASP's rule against spreadsheet formulas); the strings that come from a
  submission (student id, notebook path, review names) lose their control characters.
- for each submission, ``<folder>/result.json`` (Classroom 50's ``classroom50/result/v1``) and
  ``<folder>/feedback.md`` (in the notebook's language). The folder is the submission's key (its
  path under the submissions folder, without .ipynb), each part made safe: characters other than
  letters, digits, ``_``, ``-``, ``.`` and inner spaces replaced by ``_``, no leading dot or dash,
  at most ``PART_BYTES`` bytes, and not one of the gradebook's own file names; a part that had to
  change gets ``~`` and a hash of the original (no unchanged part contains ``~``, so two
  students' folders never meet). Folders are opened one part at a time without following links,
  so nothing is written outside ``out``.
- In ``feedback.md`` every string that may come from a submission (the student id, the notebook's
  path, each row's message, each note, the review names) is escaped for Markdown: it cannot make a
  heading, a list, a quote, a link, an image, HTML, a table or a code fence, and a one-line field
  cannot span lines. A message keeps its own line breaks, each line escaped (its code spans are
  kept; a backslash escapes the rest, ``&lt;`` stands for ``<``): a forged verdict is inert text.
- ``.gradebook.json``: the manifest, the files and folders the grader wrote, and whether the run
  finished. A run removes, when it closes, the files the previous manifest lists and it did not
  write again, if each is still a regular file inside ``out`` (never through a link), then the
  folders it created that are left empty. Nothing else is ever removed (a file or folder that
  someone planted, even one named result.json, stays), and a file that cannot be removed is
  logged, not fatal.

Every file is written whole or not at all (a temporary file, then ``os.replace``), and
``grades.csv`` and the manifest are rewritten after each submission: a grader killed mid-run
leaves a valid gradebook of the submissions that finished.

``Gradebook(out)``: ``add(graded)`` for each submission as it finishes (thread-safe), then
``close()``; ``write(results, out)`` does both for a list. A graded submission is read by
attribute: key, student, lesson, lang, notebook, rows (exercise, status, code, message, points,
max_points), notes, review, score, max_score (grader.py's Graded and Row).
"""

import csv
import errno
import hashlib
import io
import json
import logging
import os
import re
import secrets
import stat
import threading
from pathlib import Path

from course_utils.exercises import PASSED
from course_utils.i18n import LANGUAGES

from .messages import entry

CSV_COLUMNS = ("student", "lesson", "exercise", "status", "mistake", "points", "max_points", "submission", "review")
RESULT_SCHEMA = "classroom50/result/v1"
# The identity fields of a Classroom 50 result, from the variables its runner sets (when set).
RESULT_ENVIRONMENT = (("classroom", "CLASSROOM"), ("assignment", "ASSIGNMENT"), ("owner", "OWNER"),
                      ("submission", "SUBMISSION_TAG"), ("commit", "COMMIT_URL"), ("release", "RELEASE_URL"),
                      ("review", "REVIEW_URL"))
TABLE, RESULT, FEEDBACK, MANIFEST = "grades.csv", "result.json", "feedback.md", ".gradebook.json"
MANIFEST_FORMAT = "course-teacher/gradebook/v1"
MANIFEST_BYTES = 64 * 1024 * 1024  # a larger manifest is not read (nothing is removed)
PART_BYTES = 100  # the longest part of an output path kept as it is (in UTF-8 bytes)
HASH_CHARS = 12
RESERVED = {TABLE, RESULT, FEEDBACK, MANIFEST}  # names no folder of a submission may take

_log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- plain text

# control characters (C0 but newline, DEL, C1), bidirectional overrides and isolates, the BOM
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_BREAKS = re.compile("\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _text(value):
    """`value` as a str that encodes to UTF-8 (a lone surrogate, from a file name that is not
    UTF-8, becomes U+FFFD)."""
    value = value if isinstance(value, str) else str(value)
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def clean_text(value):
    """`value` without control characters but its line breaks (each one a plain newline; a tab is a space)."""
    return _CONTROL.sub(lambda m: " " if m.group() == "\t" else "", _BREAKS.sub("\n", _text(value)))


def clean_line(value):
    """`value` on one line: line breaks and tabs become spaces, other control characters go."""
    return clean_text(value).replace("\n", " ")


# ----------------------------------------------------------------------------- grades.csv

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A cell of grades.csv: numbers as they are; a string on one line, without control
    characters, and with a leading ' when it starts like a formula (=, +, -, @, tab, CR; after
    any spaces)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        value = clean_line("" if value is None else value)
        return "'" + value if value.lstrip(" ").startswith(_FORMULA) else value
    return value


def table(results):
    """The text of grades.csv for `results`, in the order given."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for graded in results:
        review = "; ".join(clean_line(name) for name in graded.review)
        for row in graded.rows:
            writer.writerow([csv_cell(v) for v in (graded.student, graded.lesson, row.exercise, row.status, row.code,
                                                   row.points, row.max_points, graded.notebook, review)])
    return buffer.getvalue()


# ----------------------------------------------------------------------------- result.json

def result_json(graded):
    """The submission's result in Classroom 50's format (classroom50/result/v1): score, max-score
    and a test per exercise; the identity fields its runner stamps come from its environment
    variables when they are set (a local run has none). Strings lose their control characters
    (a message keeps its line breaks)."""
    result = {"schema": RESULT_SCHEMA}
    for field_name, variable in RESULT_ENVIRONMENT:
        if os.environ.get(variable):
            result[field_name] = clean_line(os.environ[variable])
    result["score"], result["max-score"] = graded.score, graded.max_score
    result["tests"] = [
        {"test-name": clean_line(row.exercise or graded.key), "passed": row.status == PASSED, "score": row.points,
         "max-score": row.max_points, "status": clean_line(row.status), "mistake": clean_line(row.code or ""),
         "message": clean_text(row.message or "")}
        for row in graded.rows
    ]
    return result


# ----------------------------------------------------------------------------- feedback.md

_RUN = re.compile(r"`+")
# Outside code spans, what could make Markdown: a link's or an image's "](" (and "[" at a line's
# start, where a link reference definition could begin: so no reference link can resolve either);
# "<" before a letter, "/", "!" or "?" (HTML, a URI autolink: "x < y" stays as it is; an email
# autolink needs an "@"); "|" (a table cell); "$" (math); "@" (an email autolink); "&name;" (an
# entity); a bare link's "//" and "www." (GitHub links them); "\\" (it would escape what follows).
_SPECIAL = re.compile(r"(?i)&(?=#?[0-9a-z]+;)|<(?=[a-z/!?])|\](?=\()|[\\|@$]|(?<=:)//|(?<=www)\.")
_ESCAPED = {"&": "&amp;", "<": "&lt;", "//": "\\/\\/"}
# a line's first character that would start a block: heading, quote, list, thematic break,
# setext underline, fence, table, definition (of a link or a footnote), math
_BLOCK_START = set("#>-+*=_~:|$[")
_ORDERED = re.compile(r"^(\d{1,9})([.)])")


def _plain(text):
    """Escape text outside code spans: nothing in it can open a link, an image, HTML, an
    autolink, a table cell or math, or escape what follows it."""
    return _SPECIAL.sub(lambda m: _ESCAPED.get(m.group(), "\\" + m.group()), text)


def inline(value):
    """A one-line Markdown text for `value`: its own line breaks turned to spaces, every inline
    construct but code spans and emphasis escaped. A code span (a run of one or two backticks,
    closed by the next run of the same length on the line) is kept as it is: nothing inside one
    is Markdown. Every other backtick is escaped."""
    line = clean_line(value)
    runs = list(_RUN.finditer(line))
    pieces, position, index = [], 0, 0
    while index < len(runs):
        run, width = runs[index], len(runs[index].group())
        closer = next((j for j in range(index + 1, len(runs)) if len(runs[j].group()) == width), None) \
            if width <= 2 else None
        if closer is None:
            pieces.append(_plain(line[position:run.start()]) + "\\`" * width)
            position, index = run.end(), index + 1
        else:
            pieces.append(_plain(line[position:run.start()]) + line[run.start():runs[closer].end()])
            position, index = runs[closer].end(), closer + 1
    pieces.append(_plain(line[position:]))
    return "".join(pieces)


def block_line(value):
    """One line of Markdown for one line of `value`: `inline`, without leading whitespace (no
    indented code block), and with its first character escaped when it would start a block."""
    line = inline(clean_line(value).lstrip())
    if line[:1] in _BLOCK_START:
        return "\\" + line
    ordered = _ORDERED.match(line)
    if ordered:
        return ordered.group(1) + "\\" + line[ordered.end(1):]
    return line


def block(value):
    """`value`, a text whose line breaks are its own (a verdict's paragraphs), as Markdown lines:
    each line escaped with `block_line`, blank lines kept."""
    return [block_line(line) for line in clean_text(value).split("\n")]


def _message(key, lang, **fields):
    texts = entry(key)
    return texts[lang if lang in LANGUAGES else "en"].format(**fields)


def feedback(graded):
    """The learner's feedback, in the notebook's language: each exercise's verdict as a check
    prints it in the notebook, then what happened to the notebook's other cells. Every text from
    the submission is escaped (`inline`, `block`): the only headings are the grader's own."""
    lang = graded.lang if graded.lang in LANGUAGES else "en"
    lines = [f"# {_message('grade.title', lang, notebook=inline(graded.notebook))}", "",
             _message("grade.summary", lang, student=inline(graded.student),
                      lesson=inline(graded.lesson or "?"), score=graded.score,
                      max_score=graded.max_score), ""]
    for row in graded.rows:
        if row.exercise:
            lines += [f"## {inline(row.exercise)} ({row.points} / {row.max_points})", ""]
        lines += block(row.message or "") + [""]
    notes = [block(note) for note in graded.notes]
    if notes:
        lines += [f"## {_message('grade.notes', lang)}", ""]
        for note in notes:  # a list item; its further lines indented, so that they stay in it
            lines += [f"- {note[0]}"] + [f"  {line}" if line else "" for line in note[1:]]
        lines += [""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- safe paths

_UNSAFE = re.compile(r"[^\w.\- ]")


def safe_part(part):
    """A folder name for one part of a key: letters, digits (any script), _, -, . and inner
    spaces; no leading dot or dash; at most PART_BYTES bytes; not a gradebook file's name. A
    part that had to change gets "~" and a hash of the original (no unchanged part has a "~")."""
    original = part.encode("utf-8", "surrogatepass")
    name = _UNSAFE.sub("_", _text(part))
    name = re.sub(r"^[.\- ]+|[ ]+$", lambda m: "_" * len(m.group()), name)
    while len(name.encode("utf-8")) > PART_BYTES:
        name = name[:-1]
    if name == part and name and name.casefold() not in RESERVED:
        return name
    return f"{name or '_'}~{hashlib.sha256(original).hexdigest()[:HASH_CHARS]}"


def safe_key(key):
    """The parts of the folder (relative to out) for a submission's key: its parts separated by
    "/", each made safe (`safe_part`; an empty part, as in "/x" or "a//b", is one that changed)."""
    return [safe_part(part) for part in (key if isinstance(key, str) else _text(key)).split("/")]


def safe_folder(key):
    """The submission's folder, relative to out, as a POSIX path."""
    return "/".join(safe_key(key))


# ----------------------------------------------------------------------------- files, whole or not at all

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Folders:
    """Folders under `out`, opened one part at a time without following links (dir_fd)."""

    def __init__(self, out):
        self.root = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # out itself: the teacher's choice
        self.opened = []

    def __enter__(self):
        return self

    def __exit__(self, *_):
        for handle in self.opened + [self.root]:
            os.close(handle)

    def open(self, parts, create=None):
        """The handle of the folder out/parts; create: a set that gets the relative path of each
        folder made (None: make none; FileNotFoundError if one is missing). A part that exists
        and is not a folder, or is a link, raises OSError (ENOTDIR or ELOOP)."""
        handle, done = self.root, []
        for part in parts:
            done.append(part)
            try:
                handle = self._open(part, handle)
            except FileNotFoundError:
                if create is None:
                    raise
                os.mkdir(part, dir_fd=handle)
                create.add("/".join(done))
                handle = self._open(part, handle)
        return handle

    def _open(self, part, parent):
        handle = os.open(part, _DIRECTORY, dir_fd=parent)
        self.opened.append(handle)
        return handle


def _replace(folder, name, text):
    """Write `text` to the file `name` in the folder handle `folder`: a temporary file, then os.replace."""
    temporary = f".{name}.{secrets.token_hex(6)}.part"
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(text.encode("utf-8"))
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass
        raise


def _valid(relative):
    """Whether a manifest entry is a relative path of plain parts (nothing to climb out with)."""
    if not isinstance(relative, str) or not relative or "\x00" in relative or relative.startswith("/"):
        return False
    try:
        os.fsencode(relative)
    except UnicodeError:  # a lone surrogate no file name has
        return False
    return all(part not in ("", ".", "..") for part in relative.split("/"))


# ----------------------------------------------------------------------------- the gradebook

class GradebookError(OSError):
    """grades.csv could not be written."""


class Gradebook:
    """The gradebook under `out`, written as submissions are added: ``add(graded)`` writes that
    submission's result.json and feedback.md and rewrites grades.csv (every submission added so
    far) and the manifest; ``close()`` removes what the previous run wrote and this one did not.
    Creating one reads the previous manifest and writes an empty grades.csv (a header): the
    table only ever holds this run's submissions."""

    def __init__(self, out):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.problems = []  # what could not be done, as logged
        self._lock = threading.Lock()
        self._results = {}  # key -> graded
        self._written = set()  # files this run wrote, relative to out
        self._folders = set()  # folders made by this run or an earlier one (the manifest's)
        self._closed = False
        self._table_error = None  # why grades.csv could not be written, the last time it was not
        previous = self._previous()
        self._stale = set(previous["files"])  # to remove at close, unless written again
        self._folders |= set(previous["folders"])
        with self._lock:
            self._table()

    # -- the previous run

    def _previous(self):
        empty = {"files": [], "folders": []}
        path = self.out / MANIFEST
        try:
            with _Folders(self.out) as folders:
                handle = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                 dir_fd=folders.root)
                with os.fdopen(handle, "rb") as file:
                    info = os.fstat(file.fileno())
                    if not stat.S_ISREG(info.st_mode) or info.st_size > MANIFEST_BYTES:
                        raise ValueError("not a regular file of a manifest's size")
                    manifest = json.loads(file.read(MANIFEST_BYTES + 1).decode("utf-8"))
        except FileNotFoundError:
            return empty
        except (OSError, ValueError, RecursionError) as error:
            self._warn(f"{path}: not a gradebook manifest ({type(error).__name__}); nothing an earlier run wrote "
                       "is removed")
            return empty
        if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
            self._warn(f"{path}: not a gradebook manifest; nothing an earlier run wrote is removed")
            return empty
        found = {}
        for name in ("files", "folders"):
            entries = manifest.get(name) if isinstance(manifest.get(name), list) else []
            found[name] = [e for e in entries if _valid(e)]
            if len(found[name]) != len(entries):
                self._warn(f"{path}: {len(entries) - len(found[name])} entries of {name!r} ignored (not paths inside "
                           "the output folder)")
        return found

    # -- adding

    def add(self, graded):
        """Write `graded`'s result.json and feedback.md, then grades.csv and the manifest. A
        submission whose files cannot be written (a planted file or link in their way) is
        logged; its rows are still in grades.csv."""
        result = json.dumps(result_json(graded), indent=2, ensure_ascii=False) + "\n"
        text = feedback(graded)
        parts = safe_key(graded.key)
        with self._lock:
            if self._closed:
                raise ValueError("the gradebook is closed")
            self._results[graded.key] = graded
            folder = "/".join(parts)
            try:
                with _Folders(self.out) as folders:
                    made = set()
                    try:
                        handle = folders.open(parts, create=made)
                    finally:
                        self._folders |= made
                    for name, content in ((RESULT, result), (FEEDBACK, text)):
                        try:
                            _replace(handle, name, content)
                            self._written.add(f"{folder}/{name}")
                        except OSError as error:
                            self._warn(f"{self.out / folder / name}: could not be written "
                                       f"({type(error).__name__}: {error.strerror or error})")
            except OSError as error:
                self._warn(f"{self.out / folder}: the files of {clean_line(graded.key)!r} could not be written "
                           f"({type(error).__name__}: {error.strerror or error})")
            self._table()

    def _table(self):
        """Rewrite grades.csv (the submissions added so far, in path order) and the manifest."""
        ordered = sorted(self._results.values(), key=lambda g: (_text(g.notebook).split("/"), _text(g.key)))
        try:
            with _Folders(self.out) as folders:
                _replace(folders.root, TABLE, table(ordered))
            self._written.add(TABLE)
            self._table_error = None
        except OSError as error:
            self._table_error = error
            self._warn(f"{self.out / TABLE}: could not be written ({type(error).__name__}: {error.strerror or error})")
        self._manifest(complete=False)

    def _manifest(self, complete):
        manifest = {"format": MANIFEST_FORMAT, "complete": complete,
                    "files": sorted(self._written | self._stale), "folders": sorted(self._folders)}
        try:
            with _Folders(self.out) as folders:
                _replace(folders.root, MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        except OSError as error:
            self._warn(f"{self.out / MANIFEST}: could not be written ({type(error).__name__}: {error.strerror or error})")

    # -- closing

    def close(self):
        """Remove the files the previous manifest lists and this run did not write (only regular
        files, reached without following a link), then the manifest's folders left empty; write
        the final manifest. Raises GradebookError if grades.csv could not be written."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stale = sorted(self._stale - self._written)
            self._stale = {relative for relative in stale if not self._safely(self._remove_file, relative)}
            needed = {"/".join(f.split("/")[:i]) for f in self._written | self._stale for i in range(1, f.count("/") + 1)}
            for relative in sorted(self._folders - needed, key=lambda f: (-f.count("/"), f)):
                if self._safely(self._remove_folder, relative):
                    self._folders.discard(relative)
            self._manifest(complete=True)
            if self._table_error is not None:
                raise GradebookError(f"{self.out / TABLE} could not be written: {self._table_error}")

    def _safely(self, remove, relative):
        """remove(relative), whatever it raises: a warning (and the entry kept), never a crash."""
        try:
            return remove(relative)
        except Exception as error:  # noqa: BLE001 (the cleanup must not stop the run)
            self._warn(f"{self.out / relative}: left as it is ({type(error).__name__})")
            return False

    def _remove_file(self, relative):
        """Remove out/relative if it is a regular file there; whether it is gone (or no longer ours)."""
        *parents, name = relative.split("/")
        try:
            with _Folders(self.out) as folders:
                handle = folders.open(parents)
                info = os.lstat(name, dir_fd=handle)
                if not stat.S_ISREG(info.st_mode):
                    self._warn(f"{self.out / relative}: left alone (not a regular file)")
                    return True  # not ours any more: forgotten
                os.unlink(name, dir_fd=handle)
        except FileNotFoundError:
            return True
        except NotADirectoryError:
            self._warn(f"{self.out / relative}: left alone (a folder on its way is a link or a file)")
            return True
        except OSError as error:
            if error.errno == errno.ELOOP:
                self._warn(f"{self.out / relative}: left alone (a folder on its way is a link)")
                return True
            self._warn(f"{self.out / relative}: could not be removed ({type(error).__name__}: {error.strerror or error})")
            return False
        return True

    def _remove_folder(self, relative):
        """Remove the folder out/relative if it is empty; whether it is gone (or no longer ours)."""
        *parents, name = relative.split("/")
        try:
            with _Folders(self.out) as folders:
                handle = folders.open(parents)
                info = os.lstat(name, dir_fd=handle)
                if not stat.S_ISDIR(info.st_mode):
                    return True
                os.rmdir(name, dir_fd=handle)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:  # not empty (a planted file, or still in use): kept, and remembered
            return False
        return True

    def _warn(self, text):
        self.problems.append(text)
        _log.warning("gradebook: %s", text)

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if kind is None:
            self.close()


def write(results, out):
    """Write the gradebook of `results` under `out` (a Gradebook: each added, then closed); the
    path of grades.csv."""
    gradebook = Gradebook(out)
    for graded in results:
        gradebook.add(graded)
    gradebook.close()
    return Path(out) / TABLE
