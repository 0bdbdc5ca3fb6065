"""Lesson 10's facts that are cheaper to prove outside the notebook, or that need more seeds than one
render: the live run's val loss beats the bigram with margin whatever the seed; an untrained model's
heads do not single out a couplet's parallel place; the shipped Tang model's poems are well formed at
the lesson's setting on seeds the lesson does not draw; course_utils.verse finds the couplets and
averages the weights it says it does."""

import ast
from pathlib import Path

import jupytext
import pytest
import torch

import course_utils
from course_teacher import bilingual_code
from course_utils import corpus as C
from course_utils import gpt as G
from course_utils import pretrained
from course_utils import train_gpt as T
from course_utils import verse
from course_utils.validation import ArgumentError

ROOT = Path(course_utils.__file__).resolve().parent.parent
SOURCE = ROOT / "notebooks" / "source" / "10_gpt.py"

pytestmark = pytest.mark.usefixtures("one_thread")  # as the notebooks run (COURSE_THREADS=1)


def _notebook_assignment(name):
    """The expression the lesson's source assigns to `name`, as code (the test runs what the lesson runs)."""
    cells = [bilingual_code.localize(cell.source, "en") for cell in jupytext.read(SOURCE).cells
             if cell.cell_type == "code"]
    found = [node.value for cell in cells for node in ast.walk(ast.parse(cell)) if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]
    assert len(found) == 1, f"{SOURCE.name} assigns {name} {len(found)} times"
    return ast.unparse(found[0])


def _live_config():
    return eval(_notebook_assignment("LIVE"), {"train_gpt": T})  # the lesson's own source


# ----------------------------------------------------------------------------- the live run


@pytest.mark.trains
@pytest.mark.slow  # (ten short trainings: a minute or two on a busy machine)
def test_the_live_run_beats_the_bigram_with_margin_for_ten_seeds():
    """The notebook claims val < bigram − 0.05 after its run (seed 0, which clears it by 0.14); the claim holds
    for every seed (the weakest of these ten cleared it by 0.068 when written)."""
    config = _live_config()
    assert config.corpus == "shakespeare" and config.device == "cpu"
    bigram = C.load("shakespeare").baselines()["bigram"]
    finals = {}
    for seed in range(10):
        result = T.train(T.TrainConfig(**{**config.__dict__, "seed": seed}), verbose=False)
        finals[seed] = result.history[-1]["val_loss"]
    assert all(final < bigram - 0.05 for final in finals.values()), (bigram, finals)


# ----------------------------------------------------------------------------- the shipped Tang model's form


@pytest.mark.trains
@pytest.mark.slow  # (three draws of 200 poems from the shipped model: 20 s, more on the default kernels)
def test_the_shipped_tang_model_writes_well_formed_poems_on_three_more_seeds():
    """The notebook claims at least 95 % of 200 poems well formed at its setting (seed 0); the claim is the
    model's, not one lucky draw's: it holds on seeds 1 to 3 too (98.5 %, 98 %, 97 % when written, the same
    on the AVX-512, AVX2 and default kernels)."""
    draw = ast.literal_eval(_notebook_assignment("WELL_FORMED_DRAW"))  # the lesson's own count, temperature and top-k
    assert draw["count"] == 200 and draw["top_k"] is not None
    model, tang, _ = pretrained.load("tang")
    shares = {seed: verse.well_formed_share(verse.sample_poems(model, tang, **draw, seed=seed))
              for seed in (1, 2, 3)}
    assert all(share >= 0.95 for share in shares.values()), shares


# ----------------------------------------------------------------------------- the couplets


def _chosen_poems(tang):
    """The notebook's choice: the first 16 poems of val of each of the four forms."""
    forms = {}
    for poem in verse.poems(tang):
        forms.setdefault(len(poem), [])
        if len(forms[len(poem)]) < 16:
            forms[len(poem)].append(poem)
    return [poem for length in (25, 33, 51, 67) for poem in forms[length]]


@pytest.mark.slow  # (ten untrained models of the shipped size over 64 poems: 20 s)
def test_an_untrained_model_singles_out_no_parallel_place_for_ten_seeds():
    """The notebook's baseline: every head's ratio within 0.8 … 1.25, for any seed, not only seed 0."""
    tang = C.load("tang")
    chosen = _chosen_poems(tang)
    sizes = {"context": 128, "d_model": 256, "heads": 8, "layers": 4}  # the shipped Tang model's
    for seed in range(10):
        model = G.make_gpt(tang.vocab_size, seed=seed, **sizes).eval()
        found = verse.parallel_attention(model, tang, chosen)
        ratio = found["parallel"] / found["others"]
        assert found["pairs"] >= 1000 and 0.85 < ratio.min() and ratio.max() < 1.18, (seed, ratio)


def test_sample_poems_draws_batch_after_batch_from_one_generator():
    """More poems than verse.BATCH: every one returned, the first batch the poems a call of BATCH draws
    (the same seeded generator, used first by that batch), the next batch new ones."""
    tang = C.load("tang")
    model = G.make_gpt(tang.vocab_size, seed=0, context=16, d_model=8, heads=2, layers=1).eval()
    poems = verse.sample_poems(model, tang, verse.BATCH + 3, seed=4)
    assert len(poems) == verse.BATCH + 3 and all(isinstance(poem, str) for poem in poems)
    assert poems[:verse.BATCH] == verse.sample_poems(model, tang, verse.BATCH, seed=4)
    assert poems[verse.BATCH:] != poems[:3]


def test_couplets_are_the_lines_written_a_comma_b_full_stop():
    poem = "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"
    assert verse.couplets(poem) == [(0, 5), (13, 5)]
    assert verse.couplets("朝辞白帝彩云间，千里江陵一日还。") == [(0, 7)]
    # a line that is not a couplet of 5 or 7 a side is left out, and the next one found where it is
    assert verse.couplets("一二三，四五六。\n白日依山尽，黄河入海流。") == [(9, 5)]
    assert verse.couplets("白日依山尽，黄河入海流") == []  # no full stop
    with pytest.raises(ArgumentError, match="argument 'poem'"):
        verse.couplets(None)


def test_the_poems_of_val_are_whole_poems_after_the_split():
    tang = C.load("tang")
    val = verse.poems(tang)
    assert val[0] == tang.text[tang.boundary:].split("\n\n")[0] and all("\n\n" not in p for p in val)
    assert sum(len(p) for p in val) + 2 * (len(val) - 1) <= len(tang.text) - tang.boundary
    assert len(verse.poems(tang, "train")) + len(val) == 36_166  # the corpus's poems, every one in one split


def test_parallel_attention_averages_the_weights_it_says():
    """Against a loop over every couplet, query by query, on the maps GPT.attention_maps gives."""
    tang = C.load("tang")
    poems = verse.poems(tang)[:3] + [p for p in verse.poems(tang) if len(p) == 33][:2]
    model = G.make_gpt(tang.vocab_size, seed=3, context=80, d_model=32, heads=2, layers=2).eval()
    found = verse.parallel_attention(model, tang, poems)
    parallel, others, pairs = torch.zeros(2, 2), torch.zeros(2, 2), 0
    for poem in poems:
        maps = model.attention_maps(tang.encode(poem)[None])[:, 0]  # (layers, H, L, L)
        for start, n in verse.couplets(poem):
            for k in range(n):
                query = start + n + 1 + k
                parallel += maps[:, :, query, start + k]
                others += sum(maps[:, :, query, start + i] for i in range(n) if i != k) / (n - 1)
                pairs += 1
    assert found["pairs"] == pairs > 0
    assert torch.allclose(found["parallel"], parallel / pairs, atol=1e-6)
    assert torch.allclose(found["others"], others / pairs, atol=1e-6)


def test_parallel_attention_names_what_it_cannot_measure():
    tang = C.load("tang")
    model = G.make_gpt(tang.vocab_size, seed=0, context=16, d_model=16, heads=2, layers=1).eval()
    with pytest.raises(ArgumentError, match="argument 'texts'"):
        verse.parallel_attention(model, tang, ["白日依山尽，黄河入海流。"] * 0)
    with pytest.raises(ArgumentError, match="argument 'texts'"):  # longer than the model's context of 16
        verse.parallel_attention(model, tang, ["白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"])
    with pytest.raises(ArgumentError, match="argument 'model'"):
        verse.parallel_attention("a model", tang, ["白日依山尽，黄河入海流。"])
