"""Diagram 08_tiling (lesson 08): causal tiled attention, the tiles it computes and the update of one tile."""

from matplotlib.patches import Rectangle

from .sheet import GREY, INK, MASK, OPERATION, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

TILING = {
    "title": label("Causal tiled attention: the L×L matrix is never stored",
                   "因果分块注意力：从不存下 L×L 矩阵"),
    "queries": label("query blocks", "查询块"),
    "keys": label("key/value blocks", "键/值块"),
    "full": label("computed, no mask", "计算，无需掩码"),
    "partial": label("computed, masked (the diagonal)", "计算，加掩码（对角线）"),
    "skip": label("skipped: every entry hidden", "跳过：全部被遮住"),
    "loop": label("for each query block i, keep in fast memory:", "对每个查询块 i，在片上存储中只保留："),
    "state": label("running max, running sum, accumulator", "运行最大值、累计和、累加器"),
    "each": label("for each key block j that is not skipped:", "对每个未被跳过的键块 j："),
    "rescale": label("old terms shrink by", "旧的项乘以"),
    "diagonal": label("(mask if on the diagonal)", "（对角线上的分块加掩码）"),
    "end": label("after the last block:", "最后一个键块之后："),
    "keeps": label("kept for the backward: one number per row", "留给反向传播：每行一个数"),
}

FULL_STYLE = {"facecolor": "#4a7ab5", "edgecolor": "white"}
PARTIAL_STYLE = {"facecolor": "#e0a040", "edgecolor": "white"}
SKIP_STYLE = {"facecolor": "#f2f2f2", "edgecolor": "white"}


def tiling(lang):
    """Left: a 4 × 4 grid of tiles of a causal attention (below the diagonal computed, on it masked,
    above it skipped), query block 2 highlighted; right: the state each query block keeps and the
    update each tile makes, then the division and the log-sum-exp."""
    s = TILING
    sheet = Sheet(9.6, 4.9, lang)
    sheet.line(4.8, 4.6, [s["title"]], SIZE + 1, INK)
    n, size, left, top = 4, 0.62, 1.0, 3.9
    for i in range(n):
        for j in range(n):
            style = FULL_STYLE if j < i else PARTIAL_STYLE if j == i else SKIP_STYLE
            sheet.ax.add_patch(Rectangle((left + j * size, top - (i + 1) * size), size, size, linewidth=2, **style))
            if j == i:  # the diagonal tile's own triangle of hidden entries
                x0, y0 = left + j * size, top - (i + 1) * size
                sheet.ax.plot([x0, x0 + size], [y0 + size, y0], color="white", linewidth=1.2)
    row = 2
    sheet.ax.add_patch(Rectangle((left - 0.03, top - (row + 1) * size - 0.03), n * size + 0.06, size + 0.06,
                                 fill=False, edgecolor=MASK, linewidth=2))
    for i in range(n):
        sheet.line(left - 0.1, top - (i + 0.5) * size, [f"$Q_{i}$"], SIZE, QKV["Q"], ha="right")
        sheet.line(left + (i + 0.5) * size, top + 0.18, [f"$K_{i}, V_{i}$"], SMALL, QKV["K"])
    sheet.line(left + n * size / 2, top + 0.45, [s["keys"]], SMALL, GREY)
    sheet.ax.text(0.25, top - n * size / 2, s["queries"][lang], rotation=90, fontsize=SMALL, color=GREY,
                  ha="center", va="center")
    sheet.legend(0.55, 1.0, [(s["full"], FULL_STYLE, False, False), (s["partial"], PARTIAL_STYLE, False, False),
                             (s["skip"], {"facecolor": "#f2f2f2", "edgecolor": "#999999"}, False, False)])
    sheet.arrow((left + n * size + 0.1, top - (row + 0.5) * size), (4.05, top - (row + 0.5) * size), color=MASK)

    x = 6.75
    sheet.box(x, 3.55, 5.2, 0.72, [([s["loop"]], SMALL, GREY),
                                   ([r"$m = -\infty,\ \ \ell = 0,\ \ acc = 0$"], SIZE, INK),
                                   ([s["state"]], SMALL, GREY)], TENSOR, rounded=True)
    sheet.arrow((x, 3.19), (x, 2.92))
    sheet.box(x, 2.15, 5.2, 1.45, [([s["each"]], SMALL, GREY),
                                   ([r"$S = Q_i K_j^{\top} / \sqrt{d}$", s["diagonal"]], SIZE, INK),
                                   ([r"$m' = \max(m, \mathrm{rowmax}\,S),\ \ P = e^{S - m'}$"], SIZE, INK),
                                   ([r"$\ell \leftarrow \ell\, e^{m - m'} + \mathrm{rowsum}\,P$"], SIZE, INK),
                                   ([r"$acc \leftarrow acc\, e^{m - m'} + P V_j,\ \ m \leftarrow m'$"], SIZE, INK),
                                   ([s["rescale"], r"$e^{m - m'} \leq 1$"], SMALL, GREY)], OPERATION)
    sheet.arrow((x, 1.42), (x, 1.15))
    sheet.box(x, 0.65, 5.2, 0.95, [([s["end"]], SMALL, GREY),
                                   ([r"$O_i = acc / \ell,\ \ \ \mathrm{lse}_i = m + \log \ell$"], SIZE, INK),
                                   ([s["keeps"], r"$\mathrm{lse}_i$"], SMALL, GREY)], RESULT, rounded=True)
    return sheet.figure
