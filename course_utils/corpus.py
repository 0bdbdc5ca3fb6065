"""Lesson 10's corpora as a character model sees them: the text, its characters as ids, a train/val
split, batches of windows, and the losses a model must beat.

- ``load(name)``: ``"shakespeare"`` (1.1 M characters of Shakespeare's plays, 65 distinct) or ``"tang"``
  (36,166 regulated Tang poems in Simplified Chinese, 1.76 M characters, 6,656 distinct), read from
  the package's compressed copy (``course_utils/corpora/``, whose README gives sources and licences)
  and checked against the sha256 of its text before anything trains on it.
- ``Corpus``: ``vocab`` (the distinct characters, sorted by code point: id i is ``vocab[i]``),
  ``encode(text)`` -> int64 ids, ``decode(ids)`` -> text, ``split(name)``: the ids of "train" (the
  first 90 %) or "val" (the rest). The cut falls on the first blank line at or after 90 % of the
  text, so that validation starts with a whole poem (or a whole speech): the same split on every
  machine, nothing random in it.
- ``Corpus.batch(split, batch, context, generator)``: ``(x, y)``, both (B, T) int64: B windows of T
  characters at random starts drawn from `generator`, and the same windows shifted by one, so that
  ``y[b, t]`` is the character that follows ``x[b, : t + 1]``: T predictions per window.
- ``Corpus.baselines()``: the cross-entropy on "val", in nats per character, of two models counted on
  "train": the **unigram** (every character from its frequency, ignoring what came before) and the
  **bigram** (each character from the one before it), both add-α smoothed (a character pair never
  seen in training still gets a probability, as in makemore's add-one bigram). A Transformer that
  does not beat the bigram has learned nothing a table of pairs does not know.
"""

import functools
import hashlib
import lzma
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import validation as check

#: Where the compressed corpora live, inside the package (so that pip, the student zip and Colab carry them).
FOLDER = Path(__file__).resolve().parent / "corpora"
SPLITS = ("train", "val")
#: The share of the text that is "train" (the cut then moves to the next blank line).
TRAIN_SHARE = 0.9


@dataclass(frozen=True)
class Source:
    """A corpus's file (its name without the .xz the package stores it with) and the sha256 of its text."""

    filename: str
    sha256: str


CORPORA = {
    "shakespeare": Source("tinyshakespeare.txt", "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"),
    "tang": Source("tang_regulated_verse.txt", "05413bcd74eadf2bde9c6d96b637e66c014d399b26b7fcc643bf65c0dbd5e8a3"),
}


def _name(function, name):
    return check.one_of(function, "name", name, tuple(CORPORA))


def read_text(name):
    """The text of corpus `name`, decompressed, after its sha256 is checked (an ArgumentError naming
    the file when the package's copy is missing or differs: a broken download, an edited file)."""
    function = "read_text"
    _name(function, name)
    source = CORPORA[name]
    path = FOLDER / f"{source.filename}.xz"
    try:
        raw = lzma.decompress(path.read_bytes())
    except (OSError, lzma.LZMAError) as error:
        check.fail(function, "name", check.describe(name),
                   {"en": f"a corpus whose file {path} can be read and decompressed ({type(error).__name__}: {error}); "
                          "reinstall the course",
                    "zh": f"文件 {path} 能读取并解压的语料（{type(error).__name__}：{error}）；请重新安装课程"})
    found = hashlib.sha256(raw).hexdigest()
    if found != source.sha256:
        check.fail(function, "name", check.describe(name),
                   {"en": f"a corpus whose text has sha256 {source.sha256}; {path} gives {found}: the file is damaged or "
                          "was changed, reinstall the course",
                    "zh": f"文本的 sha256 为 {source.sha256} 的语料；{path} 得到的是 {found}：文件已损坏或被改动，"
                          "请重新安装课程"})
    return raw.decode("utf-8")


def _code_points(text):
    """(N,) uint32 numpy array: each character's code point (one array op, not a Python loop)."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


class Corpus:
    """A text with its character vocabulary and its fixed train/val split (``load`` makes one).

    Attributes: ``name``, ``text``, ``vocab`` (str of the distinct characters, in code-point order),
    ``ids`` ((N,) int64, the whole text encoded), ``boundary`` (where "val" starts in ``ids``)."""

    def __init__(self, name, text):
        check.one_of("Corpus", "name", name, (*CORPORA, "custom"))
        if not isinstance(text, str) or len(text) < 2:
            check.fail("Corpus", "text", check.describe(text),
                       {"en": "a str of at least 2 characters", "zh": "至少 2 个字符的 str"})
        self.name, self.text = name, text
        codes = _code_points(text)
        self._codes = np.unique(codes)  # (V,) sorted code points: id i is code point _codes[i]
        self.vocab = "".join(map(chr, self._codes.tolist()))
        self.ids = torch.from_numpy(np.searchsorted(self._codes, codes).astype(np.int64))  # (N,)
        cut = int(len(text) * TRAIN_SHARE)
        blank = text.find("\n\n", cut)
        self._baselines = None  # counted once, when first asked for
        self.boundary = blank + 2 if blank != -1 and blank + 2 < len(text) else cut  # "val" starts here

    def __repr__(self):
        return (f"Corpus({self.name!r}: {len(self.text):,} characters, {len(self.vocab):,} distinct; "
                f"train {self.boundary:,}, val {len(self.text) - self.boundary:,})")

    @property
    def vocab_size(self):
        return len(self.vocab)

    def encode(self, text):
        """`text` (str) -> (N,) int64 ids. Every character must be in the vocabulary."""
        function = "Corpus.encode"
        if not isinstance(text, str):
            check.fail(function, "text", check.describe(text), {"en": "a str", "zh": "str"})
        codes = _code_points(text)
        where = np.searchsorted(self._codes, codes)
        unknown = (where >= len(self._codes)) | (self._codes[np.minimum(where, len(self._codes) - 1)] != codes)
        if unknown.any():
            first = chr(int(codes[unknown.argmax()]))
            check.fail(function, "text", check.describe(text),
                       {"en": f"characters of the {self.name} corpus only; {first!r} (at index {int(unknown.argmax())}) "
                              f"is not one of its {len(self.vocab)}",
                        "zh": f"只含 {self.name} 语料中出现过的字符；{first!r}（索引 {int(unknown.argmax())}）"
                              f"不在它的 {len(self.vocab)} 个字符之中"})
        return torch.from_numpy(where.astype(np.int64))

    def decode(self, ids):
        """Ids (a 1-D int tensor or a list of ints) -> the text they stand for."""
        function = "Corpus.decode"
        if isinstance(ids, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            ids = torch.tensor(ids, dtype=torch.int64)
        check.tokens(function, "ids", ids, len(self.vocab), ndim=1, layout="(N,)")
        return "".join(self.vocab[i] for i in ids.tolist())

    def split(self, name):
        """The (N,) int64 ids of "train" or "val" (views of ``ids``, no copy)."""
        check.one_of("Corpus.split", "name", name, SPLITS)
        return self.ids[: self.boundary] if name == "train" else self.ids[self.boundary:]

    def batch(self, split, batch, context, generator):
        """``(x, y)``, each (B, T) = (batch, context) int64 on the CPU: `batch` windows of `context`
        characters of `split` starting at places drawn from `generator` (a ``torch.Generator``: the
        same generator state gives the same windows), and ``y`` the same windows one character on."""
        function = "Corpus.batch"
        data = self.split(split)
        check.positive_int(function, "batch", batch)
        check.positive_int(function, "context", context)
        if context >= len(data):
            check.fail(function, "context", check.describe(context),
                       {"en": f"fewer than the {len(data):,} characters of {split!r}",
                        "zh": f"少于 {split!r} 的 {len(data):,} 个字符"})
        check.fits_in_memory(function, "batch", batch, 2 * batch * context, 8)
        check.generator(function, "generator", generator)
        if generator.device.type != "cpu":
            check.fail(function, "generator", check.describe(generator),
                       {"en": "a CPU torch.Generator (the windows are drawn on the CPU, the same on every machine)",
                        "zh": "CPU 上的 torch.Generator（窗口在 CPU 上抽取，每台机器都一样）"})
        # on the data's device (the CPU) whatever torch's default device is: the same windows everywhere
        starts = torch.randint(len(data) - context, (batch,), generator=generator, device=data.device)  # (B,)
        offsets = torch.arange(context + 1, device=data.device)  # (T + 1,)
        windows = data[starts[:, None] + offsets]  # (B, T + 1)
        return windows[:, :-1], windows[:, 1:]  # (B, T) each: y is x one character on

    def baselines(self):
        """{"unigram": nats, "bigram": nats, "smoothing": α}: the cross-entropy per character on "val"
        of the unigram and bigram models counted on "train", each count plus α. α is the one of
        ``SMOOTHINGS`` that predicts the last tenth of "train" best from the rest of it (never chosen on
        "val"): add-one (α = 1) suits Shakespeare's 65 characters, but spreads too much probability over
        the Tang poems' 6,656² pairs, a far weaker baseline than a bigram can be."""
        if self._baselines is None:
            train, val = self.split("train"), self.split("val")
            cut = int(len(train) * 0.9)
            held_out = _Counts(train[:cut], len(self.vocab))
            smoothing = min(SMOOTHINGS, key=lambda a: held_out.bigram(train[cut:], a))
            counts = _Counts(train, len(self.vocab))
            self._baselines = {"unigram": counts.unigram(val, smoothing), "bigram": counts.bigram(val, smoothing),
                               "smoothing": smoothing}
        return dict(self._baselines)


#: The add-α smoothings ``Corpus.baselines`` chooses from.
SMOOTHINGS = (1.0, 0.3, 0.1, 0.03, 0.01)


class _Counts:
    """How often each character and each pair of neighbouring characters occurs in `ids`."""

    def __init__(self, ids, V):
        self.V = V
        self.counts = torch.bincount(ids, minlength=V).double()  # (V,)
        # pairs as one number a·V + b; the table of all V² pairs (44 M for the Tang poems) is never built
        self.pairs, self.pair_counts = torch.unique(ids[:-1] * V + ids[1:], return_counts=True)  # sorted
        self.following = torch.bincount(ids[:-1], minlength=V).double()  # (V,): how often a character has a successor

    def unigram(self, ids, smoothing):
        """Cross-entropy (nats per character) of `ids` under the add-α unigram."""
        p = (self.counts + smoothing) / (self.counts.sum() + smoothing * self.V)  # (V,)
        return -p.log()[ids].mean().item()

    def bigram(self, ids, smoothing):
        """Cross-entropy of `ids`[1:] given each previous character, under the add-α bigram."""
        wanted = ids[:-1] * self.V + ids[1:]
        where = torch.searchsorted(self.pairs, wanted).clamp(max=len(self.pairs) - 1)
        seen = torch.where(self.pairs[where] == wanted, self.pair_counts[where], 0).double()
        p = (seen + smoothing) / (self.following[ids[:-1]] + smoothing * self.V)
        return -p.log().mean().item()


@functools.cache
def load(name):
    """The corpus `name` ("shakespeare" or "tang"), read once per process (later calls give the same object)."""
    _name("load", name)
    return Corpus(name, read_text(name))


def check_corpus(function, argument, value):
    """`value` when it is a ``Corpus`` (``load``'s), said as `function`'s `argument` otherwise."""
    if not isinstance(value, Corpus):
        check.fail(function, argument, check.describe(value),
                   {"en": "a corpus, e.g. corpus.load('shakespeare') or corpus.load('tang')",
                    "zh": "语料，例如 corpus.load('shakespeare') 或 corpus.load('tang')"})
    return value


def uniform_loss(vocab_size):
    """ln V: the cross-entropy of a model that gives every character the same probability (an untrained one)."""
    check.positive_int("uniform_loss", "vocab_size", vocab_size)
    return math.log(vocab_size)
