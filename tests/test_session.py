"""setup(): seeds, threads, language, and plots that render Chinese without missing glyphs."""

import re
import subprocess
import sys
import textwrap
import warnings

import matplotlib
import pytest
import torch
from matplotlib import font_manager
from matplotlib.figure import Figure

from course_utils import i18n, setup, viz, widgets


def test_setup_seeds_and_pins_threads(monkeypatch):
    monkeypatch.delenv("COURSE_THREADS", raising=False)
    setup(lang="en")
    first = torch.rand(3)
    torch.set_num_threads(2)
    setup(lang="en")
    assert torch.equal(torch.rand(3), first)
    assert torch.get_num_threads() == 1
    monkeypatch.setenv("COURSE_THREADS", "2")
    setup(lang="en")
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)


def test_setup_sets_the_language_and_rejects_unknown_ones():
    setup(lang="zh")
    assert i18n.language() == "zh"
    with pytest.raises(ValueError, match="lang"):
        setup(lang="fr")


def test_every_message_exists_in_both_languages_with_the_same_fields():
    from course_teacher import messages  # the teacher's side's tables: the build's, and the grader's
    from course_teacher.grade import messages as grade_messages

    for key, texts in {**i18n.MESSAGES, **grade_messages.MESSAGES, **messages.MESSAGES}.items():
        assert set(texts) == set(i18n.LANGUAGES) and all(texts.values()), key
        fields = [set(re.findall(r"{(\w+)", texts[lang])) for lang in i18n.LANGUAGES]
        assert all(found == fields[0] for found in fields), key


def test_chinese_renders_with_the_shipped_font_and_no_glyph_warnings():
    setup(lang="zh")
    font = font_manager.findfont(font_manager.FontProperties(family=viz.CJK_FONT_NAME), fallback_to_default=False)
    assert font.endswith(viz.CJK_FONT_FILE)
    figure = Figure()
    ax = figure.subplots()
    ax.set_title("注意力权重 (attention weights) −1.5 √d_k")
    ax.set_xlabel("键（key）")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        png = viz.figure_png(figure)
    assert png.startswith(b"\x89PNG")
    assert matplotlib.rcParams["font.sans-serif"][:2] == ["DejaVu Sans", viz.CJK_FONT_NAME]


def test_the_shipped_font_is_chosen_by_its_file_even_beside_a_system_font_of_its_family():
    """A machine with Debian's fonts-noto-cjk has a Noto Sans CJK SC of its own (a .ttc): matplotlib,
    which picks fonts by family name, drew the Chinese pictures with it. Here another file registered
    under that family name (in a fresh process) stands for it: the course still draws with its own."""
    code = textwrap.dedent("""
        import dataclasses
        from matplotlib import font_manager
        system = next(f for f in font_manager.fontManager.ttflist if f.name == "DejaVu Sans")
        # another file of the shipped font's family, found first
        font_manager.fontManager.ttflist.insert(0, dataclasses.replace(system, name="Noto Sans CJK SC"))
        from course_utils import setup, viz
        setup(lang="zh")
        found = font_manager.findfont(font_manager.FontProperties(family=viz.CJK_FONT_NAME), fallback_to_default=False)
        print(found)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(viz.CJK_FONT_FILE), done.stdout


def test_heatmap_labels_follow_the_language():
    setup(lang="zh")
    figure = Figure()
    ax = viz.heatmap(torch.eye(3), ax=figure.subplots(), queries=list("abc"))
    assert ax.get_xlabel() == "键（key）" and [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert len(ax.texts) == 9  # small matrices are annotated


def test_heatmap_rejects_a_batch():
    with pytest.raises(ValueError, match=r"'weights' got a tensor of shape \(2, 3, 3\).*needs numbers of shape \(L_q, L_k\)"):
        viz.heatmap(torch.ones(2, 3, 3))


def test_explorer_reruns_its_view_when_a_control_moves():
    import ipywidgets as w

    calls = []

    def view(n, scaled):
        calls.append((n, scaled))
        figure = Figure()
        figure.subplots().plot(range(n))
        return figure, f"n = {n} <{scaled}>"

    box = widgets.explorer(view, n=w.IntSlider(value=2, min=1, max=5), scaled=w.Checkbox(value=True))
    first_image = box.image.value
    assert calls == [(2, True)] and "n = 2 &lt;True&gt;" in box.summary.value
    box.children[0].children[0].value = 4
    assert calls[-1] == (4, True) and "n = 4" in box.summary.value and box.image.value != first_image
