"""Lesson 09: follow one program of the FlashAttention forward kernel through its key blocks.

The example is fixed (``EXAMPLE``): one head, L = 56 queries and keys (three blocks of 16 and a
ragged last block of 8), d = 8, blocks of 16. A program owns one query block; ``program_steps``
replays, in float64, what its loop does block after block: which key blocks it loads (causal: none
above the diagonal), which of them it masks (the diagonal block, the ragged last block), and its
16 rows' running max m and running sum ℓ after each. ``program_view`` draws the blocks and the
rows' m and ℓ so far; ``program_explorer`` puts a query block, a causal switch and a step slider on it.
The last step's m + log ℓ is the lse the kernel stores: the view says when it equals torch's.
"""

import math
from functools import lru_cache

import ipywidgets as w
import torch

from .. import validation
from ..i18n import pick
from ..viz import new_figure
from ..viz.figures import LayoutPerKey
from .explorer import explorer, reusable

L, D, BLOCK = 56, 8, 16
BLOCKS = math.ceil(L / BLOCK)  # query blocks and key blocks alike: 4, the last one ragged

TEXT = {
    "query_block": {"en": "query block", "zh": "查询块"},
    "causal": {"en": "causal", "zh": "因果"},
    "step": {"en": "key blocks done", "zh": "已处理的键块"},
    "keys": {"en": "key block", "zh": "键块"},
    "row": {"en": "query row of the block", "zh": "块内的查询行"},
    "blocks_title": {"en": "program {i}: its key blocks", "zh": "程序 {i}：它的键块"},
    "state_title": {"en": "running max m (dots) and log ℓ (bars)", "zh": "运行最大值 m（点）与 log ℓ（条）"},
    "loaded": {"en": "loaded", "zh": "已读入"},
    "current": {"en": "loading now", "zh": "正在读入"},
    "pending": {"en": "to load", "zh": "待读入"},
    "never": {"en": "never loaded", "zh": "从不读入"},
    "start": {"en": "Program {i} owns queries {first}–{last}. Before its loop: m = −∞, ℓ = 0 for each row; it will "
                    "load {loads} of the {total} key blocks.",
              "zh": "程序 {i} 负责查询 {first}–{last}。循环开始前：每一行 m = −∞，ℓ = 0；它将读入 {total} 个键块中的 "
                    "{loads} 个。"},
    "block": {"en": "Step {step} of {loads}: key block {j} (keys {first}–{last}), {mask}. The rescale factor "
                    "exp(m_old − m_new) of row 0: {factor}.",
              "zh": "第 {step} 步（共 {loads} 步）：键块 {j}（键 {first}–{last}），{mask}。第 0 行的缩放因子 "
                    "exp(m_old − m_new)：{factor}。"},
    "no_mask": {"en": "no mask", "zh": "无需掩码"},
    "diagonal": {"en": "masked: the diagonal block (keys after each query hidden)",
                 "zh": "加掩码：对角线块（遮住每个查询之后的键）"},
    "ragged": {"en": "masked: the partial last block (positions past key {end} hidden)",
               "zh": "加掩码：不满的最后一块（遮住键 {end} 之后的位置）"},
    "both": {"en": "masked: the diagonal block, also the partial last one", "zh": "加掩码：对角线块，同时是不满的最后一块"},
    "skipped": {"en": "Never loaded (above the diagonal): key blocks {blocks}.", "zh": "从不读入（在对角线上方）：键块 {blocks}。"},
    "header": {"en": "  row        m        ℓ", "zh": "   行        m        ℓ"},
    "done": {"en": "The loop is over: lse = m + log ℓ equals torch.logsumexp of the row's scaled scores for every "
                   "row (largest gap {gap:.1e}).",
             "zh": "循环结束：每一行的 lse = m + log ℓ 都等于 torch.logsumexp 对这一行缩放后分数的结果（最大差距 {gap:.1e}）。"},
}


def _example():
    g = torch.Generator().manual_seed(9)
    return (torch.randn(L, D, generator=g, dtype=torch.float64) * 1.5,
            torch.randn(L, D, generator=g, dtype=torch.float64) * 1.5)


#: (query, key) of the explorer, float64: (56, 8) each.
EXAMPLE = _example()


def loaded_blocks(block, causal):
    """The key blocks program `block` loads, in order: all of them, or causal those up to the diagonal."""
    end = min((block + 1) * BLOCK, L) if causal else L
    return list(range(math.ceil(end / BLOCK)))


def program_steps(block=0, causal=False):
    """[(key block or None, mask kind, m, ℓ)]: the state of program `block`'s rows (m, ℓ: float64 tensors
    of its rows) before its loop, then after each key block it loads. mask kind: None, "diagonal",
    "ragged" or "both"."""
    validation.whole_number("program_steps", "block", block, 0, BLOCKS - 1)
    validation.flag("program_steps", "causal", causal)
    return list(_steps(block, causal))


@lru_cache(maxsize=16)
def _steps(block, causal):
    q, k = EXAMPLE
    rows = torch.arange(block * BLOCK, min((block + 1) * BLOCK, L))
    m = torch.full((len(rows),), -math.inf, dtype=torch.float64)
    ell = torch.zeros(len(rows), dtype=torch.float64)
    steps = [(None, None, m, ell)]
    for j in loaded_blocks(block, causal):
        columns = torch.arange(j * BLOCK, (j + 1) * BLOCK)  # a whole block, as the kernel loads it
        scores = (q[rows] @ k[columns.clamp(max=L - 1)].T) / math.sqrt(D)
        hidden = (columns >= L).expand(len(rows), -1)
        ragged = bool((columns >= L).any())
        diagonal = causal and bool((columns[None, :] > rows[:, None]).any())
        if causal:
            hidden = hidden | (columns[None, :] > rows[:, None])
        scores = scores.masked_fill(hidden, -math.inf)
        new_m = torch.maximum(m, scores.amax(-1))
        ell = ell * torch.exp(m - new_m) + torch.exp(scores - new_m[:, None]).sum(-1)
        m = new_m
        kind = "both" if ragged and diagonal else "ragged" if ragged else "diagonal" if diagonal else None
        steps.append((j, kind, m, ell))
    return tuple(steps)


def _lse(block, causal):
    """torch.logsumexp of the rows' scaled scores, materialised: what the loop must end with."""
    q, k = EXAMPLE
    rows = torch.arange(block * BLOCK, min((block + 1) * BLOCK, L))
    scores = q[rows] @ k.T / math.sqrt(D)
    if causal:
        scores = scores.masked_fill(torch.arange(L)[None, :] > rows[:, None], -math.inf)
    return torch.logsumexp(scores, -1)


#: The colours of a key block's states in the view (loaded, loading now, to load, never loaded).
COLOURS = {"loaded": "#4a7ab5", "current": "#e0a040", "pending": "#cfdcec", "never": "#f2f2f2"}


def program_view(block=0, causal=False, step=0, figure=None):
    """After `step` loaded key blocks (clamped to the last) of program `block`: the key blocks (loaded,
    loading now, to load, never loaded) and each row's m and log ℓ; the summary says what the step
    loaded and masked and lists the rows' m and ℓ. figure: one this view returned before, drawn again
    in place of a new one (what the explorer passes: a new figure and its layout cost more than the
    view)."""
    steps = program_steps(block, causal)
    validation.whole_number("program_view", "step", step)
    step = min(step, len(steps) - 1)
    current, kind, m, ell = steps[step]
    loads = len(steps) - 1
    figure = reusable(figure, "program")
    if figure is None:
        figure = _program_figure()
    ax, state_ax = figure.axes
    for j, (bar, label) in enumerate(zip(figure.program_bars, figure.program_labels)):
        state = "never" if j >= loads else "loaded" if j < step - 1 or (j < step and current != j) else \
            "current" if j == current else "pending"
        bar.set_facecolor(COLOURS[state])
        bar.set_edgecolor("#999999" if state == "never" else "white")
        label.set_color("white" if state in ("loaded", "current") else "#333333")
    ax.set_title(pick(TEXT["blocks_title"]).format(i=block), fontsize=10)
    ax = state_ax
    for drawn in [*ax.containers, *ax.lines]:  # the last view's bars and dots
        drawn.remove()
    rows = range(len(m))
    finite = torch.isfinite(m)
    if bool(finite.any()):
        bars = ax.bar([r for r in rows if finite[r]], torch.log(ell[finite]).tolist(), color="#cfdcec", label="log ℓ")
        (dots,) = ax.plot([r for r in rows if finite[r]], m[finite].tolist(), "o", color="#a33b2f", markersize=4,
                          label="m")
        for drawn in (*bars, dots):  # inside the axes: the layout (kept per set of texts) never depends on them
            drawn.set_in_layout(False)
    ax.set_xlim(-0.6, BLOCK - 0.4)
    final_m, final_ell = steps[-1][2], steps[-1][3]  # m only grows, ℓ ends where the program ends: fixed axes
    ax.set_ylim(min(0.0, torch.log(final_ell).min().item()) - 0.5, max(final_m.max().item(),
                                                                       torch.log(final_ell).max().item()) + 0.5)
    first, last = block * BLOCK, min((block + 1) * BLOCK, L) - 1
    if current is None:
        lines = [pick(TEXT["start"]).format(i=block, first=first, last=last, loads=loads, total=BLOCKS)]
    else:
        mask = pick(TEXT["no_mask"]) if kind is None else pick(TEXT[kind]).format(end=L - 1)
        previous = steps[step - 1][2][0]
        factor = "0 (m_old = −∞)" if previous == -math.inf else f"{math.exp(previous - m[0].item()):.3f}"
        lines = [pick(TEXT["block"]).format(step=step, loads=loads, j=current, first=current * BLOCK,
                                            last=min((current + 1) * BLOCK, L) - 1, mask=mask, factor=factor)]
    if loads < BLOCKS:
        lines.append(pick(TEXT["skipped"]).format(blocks=", ".join(map(str, range(loads, BLOCKS)))))
    lines += ["", pick(TEXT["header"])]
    for r in rows:
        shown = "−∞" if m[r] == -math.inf else f"{m[r].item():.3f}"
        lines.append(f"{first + r:>5}  {shown:>7}  {ell[r].item():7.3f}")
    if step == loads:
        gap = (m + torch.log(ell) - _lse(block, causal)).abs().max().item()
        lines += ["", pick(TEXT["done"]).format(gap=gap)]
    return figure, "\n".join(lines)


def _program_figure():
    """The view's figure, drawn once: the key blocks (their colours set by the view) with the legend of
    their states, and the axes of the rows' m and ℓ (their bars and dots drawn by the view). Its tick
    labels change with the program's range of m and ℓ: each range is laid out once (LayoutPerKey)."""
    figure, axes = new_figure(cols=2, size=(8.4, 3.0))
    figure.set_layout_engine(LayoutPerKey(_layout_key))
    figure.explorer_key = "program"
    ax = axes[0, 0]
    figure.program_bars, figure.program_labels = [], []
    for j in range(BLOCKS):
        width = (min((j + 1) * BLOCK, L) - j * BLOCK) / BLOCK
        (bar,) = ax.barh(0, width * 0.92, left=j, height=0.6, color=COLOURS["pending"], edgecolor="white",
                         align="center")
        figure.program_bars.append(bar)
        figure.program_labels.append(ax.text(j + width * 0.46, 0, f"{j}", ha="center", va="center", fontsize=10))
    ax.set_xlim(-0.1, BLOCKS + 0.1)
    ax.set_ylim(-1.3, 0.6)
    ax.set_yticks([])
    ax.set_xticks([])
    for n, state in enumerate(("loaded", "current", "pending", "never")):
        ax.barh(-0.85, 0.25, left=n * 1.02, height=0.22, color=COLOURS[state], edgecolor="#999999")
        ax.text(n * 1.02 + 0.3, -0.85, pick(TEXT[state]), va="center", fontsize=8)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax = axes[0, 1]
    ax.set_xlabel(pick(TEXT["row"]), fontsize=10)
    ax.set_title(pick(TEXT["state_title"]), fontsize=10)
    ax.tick_params(labelsize=9)
    return figure


def _layout_key(figure):
    """What the view's layout depends on (LayoutPerKey): the blocks' title (the program's number) and the
    range of m and ℓ, whose tick labels set the left margin of their axes (read as the range: the labels
    themselves are made as the figure is drawn), every other text fixed."""
    return figure.axes[0].get_title(), tuple(figure.axes[1].get_ylim())


def program_explorer(block=2, causal=True):
    """Pick a query block and whether the attention is causal, then move the slider: the program
    loads its key blocks one after the other (``program_view``)."""
    validation.whole_number("program_explorer", "block", block, 0, BLOCKS - 1)
    validation.flag("program_explorer", "causal", causal)
    style = {"description_width": "initial"}
    block_choice = w.Dropdown(options=list(range(BLOCKS)), value=block, description=pick(TEXT["query_block"]),
                              style=style, layout=w.Layout(width="180px"))
    causal_box = w.Checkbox(value=causal, description=pick(TEXT["causal"]), style=style)
    step = w.IntSlider(value=0, min=0, max=len(loaded_blocks(block, causal)), description=pick(TEXT["step"]),
                       continuous_update=False, style=style)

    def follow(_change):
        """The slider ends at the last block this program loads (set before the view redraws)."""
        step.max = len(loaded_blocks(block_choice.value, causal_box.value))

    block_choice.observe(follow, names="value")
    causal_box.observe(follow, names="value")
    return explorer(program_view, block=block_choice, causal=causal_box, step=step)
