"""Write the course's compressed corpora (course_utils/corpora/*.txt.xz) from the plain texts, and
check each text's sha256 against the one course_utils.corpus expects.

usage: python data/pack_corpora.py FOLDER   (FOLDER holds tinyshakespeare.txt and tang_regulated_verse.txt;
the second is what build_tang_regulated_verse.py writes)

xz (the standard library's lzma, preset 9e) makes them 0.36 MB and 2.0 MB, against 0.43 MB and 2.6 MB
with gzip -9: the student zip and the installed package carry 2.4 MB of text instead of 6.1 MB.
"""

import hashlib
import lzma
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # course_utils without installing it

from course_utils import corpus


def main(folder):
    for name, source in corpus.CORPORA.items():
        raw = (Path(folder) / source.filename).read_bytes()
        found = hashlib.sha256(raw).hexdigest()
        if found != source.sha256:
            raise SystemExit(f"{source.filename}: sha256 {found}, expected {source.sha256}")
        target = corpus.FOLDER / f"{source.filename}.xz"
        target.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        print(f"{name}: {len(raw):,} bytes -> {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(*sys.argv[1:2])
