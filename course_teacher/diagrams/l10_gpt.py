"""Diagram 10_gpt (lesson 10): the decoder-only GPT of ``course_utils.gpt`` in one picture, the
characters at the bottom. Characters → ids → the token embedding plus the learned position
embedding → N pre-norm blocks (LayerNorm → masked multi-head self-attention → add; LayerNorm → MLP
→ add: the residual stream runs up the left) → a final LayerNorm → the read-out, whose matrix is the
embedding's (weight tying) → softmax: at every position the distribution of the next character.
On the side, what generation changes: the prompt is prefilled once, then each step feeds one new
character through the blocks, each block appending its key and value to its own KV cache, and the
character sampled (temperature, top-k) is the next step's input."""

from matplotlib.patches import FancyBboxPatch, Rectangle

from .l06_encoder_layer import IDENTITY, NORM
from .sheet import ATTENTION, GREY, INK, OPERATION, PANEL, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

#: the tied matrix, drawn in one colour where it reads characters in and where it reads them out
TIED = "#7a4fa3"

DECODER_ONLY = {
    "text": label("“To be, or not”", "“床前明月光”"),
    "ids": label("→ ids", "→ 编号"),
    "embed": label("token embedding + position embedding", "词元嵌入 + 位置嵌入"),
    "block": label("block", "块"),
    "times": label("× N blocks (pre-norm)", "× N 个块（前归一化）"),
    "norm": label("LayerNorm", "层归一化"),
    "attention": label("masked multi-head self-attention", "带掩码的多头自注意力"),
    "causal": label("causal: position t sees 0 … t", "因果：位置 t 只看 0 … t"),
    "mlp": label("MLP", "多层感知机（MLP）"),
    "gelu": label("each position: E → 4E → E, GELU", "逐位置：E → 4E → E，GELU"),
    "residual": label("residual stream", "残差流"),
    "final": label("final LayerNorm", "最后的层归一化"),
    "readout": label("read-out", "读出层"),
    "tied": label("the embedding's matrix, transposed", "即嵌入矩阵的转置"),
    "tying": label("weight tying: one (V, E) matrix", "权重共享：同一个 (V, E) 矩阵"),
    "distribution": label("next-character distribution", "下一个字符的分布"),
    "predicts": label("position t predicts character t + 1", "位置 t 预测第 t + 1 个字符"),
    "generation": label("At generation: the KV cache", "生成时：KV 缓存"),
    "prefill": label("1. the prompt: one pass (prefill)", "1. 提示：整段过一遍（预填充）"),
    "step": label("2. then one new character a step", "2. 之后每步只送入一个新字符"),
    "cache": label("each block's K, V cache", "每个块自己的 K、V 缓存"),
    "append": label("its k, v appended", "追加它的 k、v"),
    "attends": label("its q attends to all t + 1", "它的 q 看全部 t + 1 个位置"),
    "sample": label("3. sample: temperature, top-k", "3. 采样：温度、top-k"),
    "greedy": label("(temperature 0: greedy)", "（温度为 0：贪心解码）"),
    "fed_back": label("4. the sample is the next input", "4. 采出的字符成为下一步的输入"),
    "window": label("past the context: a new window,", "超出上下文窗口：换一个新窗口，"),
    "prefilled": label("its last C/2 characters prefilled", "预填充最后 C/2 个字符"),
    "per_block": label("per block", "每个块"),
}

#: heights of the parts, bottom to top, and the gaps between them (a wider one below a LayerNorm,
#: where the residual branches off)
HEIGHT = {"tokens": 0.62, "embed": 0.5, "norm": 0.28, "attention": 0.62, "mlp": 0.62, "add": 0.28, "final": 0.3,
          "readout": 0.62, "distribution": 0.62}
PARTS = ("tokens", "embed", "norm", "attention", "add", "norm", "mlp", "add", "final", "readout", "distribution")
GAP, BRANCH_GAP, R = 0.22, 0.38, 0.14  # R: the radius of an add
T = 5  # cached positions drawn


def _layout(bottom):
    """The centre of each part of PARTS, stacked from `bottom` up."""
    centres, y = [], bottom
    for index, part in enumerate(PARTS):
        if index:
            before = PARTS[index - 1]
            y += BRANCH_GAP if part == "norm" else 0.75 if before == "add" and part == "final" else GAP
        centres.append(y + HEIGHT[part] / 2)
        y += HEIGHT[part]
    return centres


def decoder_only(lang):
    """The model's column (module docstring), the residual up the left of each sub-layer, the tied
    matrix drawn at the embedding and the read-out; on the right, generation with the KV cache."""
    s = DECODER_ONLY
    centres = _layout(0.3)
    height = centres[-1] + HEIGHT["distribution"] / 2 + 0.15
    sheet = Sheet(11.3, height, lang)
    ax = sheet.ax
    x, box_w, wide, side = 2.85, 3.0, 3.55, 1.75  # side: the residual line's distance from the centre
    where = {}
    for index, part in enumerate(PARTS):
        where.setdefault(part, []).append(centres[index])

    # the panel of the repeated block, its title in the gap below the final LayerNorm
    first_norm, last_add = where["norm"][0], where["add"][1]
    low = first_norm - HEIGHT["norm"] / 2 - BRANCH_GAP / 2 - 0.12
    top = last_add + R + 0.5
    ax.add_patch(FancyBboxPatch((x - side - 0.15, low), side + box_w / 2 + 0.3, top - low,
                                boxstyle="round,pad=0,rounding_size=0.15", **PANEL))
    sheet.line(x - side - 0.02, top - 0.24, [s["times"]], SIZE, INK, ha="left")

    for index, (part, y) in enumerate(zip(PARTS, centres)):
        h = HEIGHT[part]
        if part == "tokens":
            sheet.box(x, y, wide, h, [([s["text"], s["ids"]], SIZE, INK), (["$(B, T)$"], SMALL, GREY)],
                      TENSOR, rounded=True)
        elif part == "embed":
            sheet.box(x, y, wide, h, [([s["embed"]], SIZE, INK), (["$(B, T, E)$"], SMALL, GREY)], OPERATION)
        elif part in ("norm", "final"):
            sheet.box(x, y, box_w, h, [([s["norm" if part == "norm" else "final"]], SIZE, INK)], NORM)
        elif part == "attention":
            sheet.box(x, y, box_w, h, [([s["attention"]], SIZE, INK), ([s["causal"]], SMALL, GREY)], ATTENTION)
        elif part == "mlp":
            sheet.box(x, y, box_w, h, [([s["mlp"]], SIZE, INK), ([s["gelu"]], SMALL, GREY)], OPERATION)
        elif part == "add":
            ax.add_patch(FancyBboxPatch((x - R, y - R), 2 * R, 2 * R, boxstyle="circle,pad=0", linewidth=1.3,
                                        **OPERATION))
            sheet.line(x, y, ["$+$"], SIZE, INK)
        elif part == "readout":
            sheet.box(x, y, box_w, h, [([s["readout"], r"$E \to V$"], SIZE, INK), ([s["tied"]], SMALL, TIED)],
                      OPERATION)
        elif part == "distribution":
            sheet.box(x, y, wide, h, [(["softmax →", s["distribution"], "$(B, T, V)$"], SIZE, INK),
                                      ([s["predicts"]], SMALL, GREY)], RESULT, rounded=True)
    # the main line, part to part (an add entered from below, its radius away)
    for index in range(len(PARTS) - 1):
        start = centres[index] + (R if PARTS[index] == "add" else HEIGHT[PARTS[index]] / 2)
        end = centres[index + 1] - (R if PARTS[index + 1] == "add" else HEIGHT[PARTS[index + 1]] / 2)
        sheet.arrow((x, start), (x, end))
    # the residuals: from a point below each sub-layer's LayerNorm, up the left, into its add
    for norm_y, add_y in zip(where["norm"], where["add"]):
        branch = norm_y - HEIGHT["norm"] / 2 - BRANCH_GAP / 2
        sheet.dot(x, branch, color=IDENTITY)
        sheet.arrow((x, branch), (x - side, branch), (x - side, add_y), (x - R, add_y), color=IDENTITY, width=2.0)
    sheet.line(x - side + 0.05, where["add"][1] + 0.22, [s["residual"]], SMALL, IDENTITY, ha="left")

    # weight tying: one matrix, at the embedding and at the read-out, joined on the right
    tie_x = x + wide / 2 + 0.25
    embed_y, readout_y = where["embed"][0], where["readout"][0]
    sheet.arrow((x + wide / 2, embed_y), (tie_x, embed_y), (tie_x, readout_y), (x + box_w / 2, readout_y), color=TIED,
                dashed=True)
    sheet.line(tie_x + 0.12, (where["final"][0] + readout_y) / 2, [s["tying"]], SMALL, TIED, ha="left")

    # generation with the KV cache, on the right: one block's caches level with the attention that fills them
    left, right = 7.05, 11.1
    attention_y = where["attention"][0]
    cell, grid_left = 0.4, left + 0.7
    rows = {"K": attention_y + 0.47, "V": attention_y - 0.01}
    lines_above = [(0.55, [s["cache"], "$(B, H, t + 1, d)$"], SMALL, GREY, "grid"),
                   (0.45, [s["step"]], SIZE, INK, "text"),
                   (0.36, [s["prefill"]], SIZE, INK, "text")]
    y = rows["K"]
    for gap, parts, size, colour, kind in lines_above:
        y += gap
        if kind == "grid":
            sheet.line(grid_left + 3 * cell, y, parts, size, colour)
        else:
            sheet.line(left + 0.2, y, parts, size, colour, ha="left")
    panel_top = y + 0.85
    sheet.line((left + right) / 2, panel_top - 0.35, [s["generation"]], SIZE + 1, INK)
    for name, colour in (("K", QKV["K"]), ("V", QKV["V"])):
        y = rows[name]
        sheet.line(grid_left - 0.15, y, [f"${name}$"], SIZE, colour, ha="right")
        for t in range(T + 1):
            new = t == T
            ax.add_patch(Rectangle((grid_left + t * cell, y - (cell - 0.05) / 2), cell - 0.05, cell - 0.05,
                                   facecolor=RESULT["facecolor"] if new else TENSOR["facecolor"],
                                   edgecolor=RESULT["edgecolor"] if new else TENSOR["edgecolor"], linewidth=1.1))
            sheet.line(grid_left + t * cell + (cell - 0.05) / 2, y, ["$t$" if new else str(t)], SMALL, INK)
    grid_right = grid_left + (T + 1) * cell - 0.05
    y = rows["V"] - 0.4
    sheet.line(grid_right, y, [s["append"]], SMALL, RESULT["edgecolor"], ha="right")
    y -= 0.3
    sheet.line(grid_right, y, [s["attends"]], SMALL, QKV["Q"], ha="right")
    y -= 0.45
    sheet.line(left + 0.2, y, [s["sample"]], SIZE, INK, ha="left")
    y -= 0.3
    sheet.line(left + 0.45, y, [s["greedy"]], SMALL, GREY, ha="left")
    y -= 0.4
    sheet.line(left + 0.2, y, [s["fed_back"]], SIZE, INK, ha="left")
    y -= 0.45
    sheet.lines(left + 0.2, y, [([s["window"]], SMALL, GREY), ([s["prefilled"]], SMALL, GREY)], ha="left")
    panel_bottom = y - 0.35
    patch = FancyBboxPatch((left, panel_bottom), right - left, panel_top - panel_bottom,
                           boxstyle="round,pad=0,rounding_size=0.15", **PANEL)
    patch.set_zorder(0.5)  # under the texts and cells drawn before it
    ax.add_patch(patch)
    # the attention of every block reads and writes its own cache
    sheet.arrow((x + box_w / 2, attention_y), (left, attention_y), color=QKV["K"], dashed=True)
    sheet.line((tie_x + left) / 2, attention_y + 0.17, [s["per_block"]], SMALL, QKV["K"])
    return sheet.figure
