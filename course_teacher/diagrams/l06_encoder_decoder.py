"""Diagram 06_encoder_decoder (lesson 06): the one-layer encoder–decoder ``seq2seq.Reverser`` trains,
the input at the bottom. Its layers are pre-norm (``norm_first=True``), as the model's are: each
sub-layer reads a LayerNorm of the stream and adds its output back (the residual, drawn up the left
of each sub-layer), and each stack ends with a final LayerNorm. The encoder turns the source tokens
into the memory; the decoder reads the target tokens shifted right (a start token first) and
predicts the next token at every position. Two masks, drawn in two colours: the source padding
mask (used twice: in the encoder's self-attention and in the decoder's cross-attention, over the
memory) and the target mask (causal and target padding, in the decoder's self-attention)."""

from matplotlib.patches import FancyBboxPatch

from .l06_encoder_layer import IDENTITY, NORM
from .sheet import ATTENTION, GREY, INK, MASK, OPERATION, PANEL, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

#: the two masks: the source padding mask in the course's mask red, the target mask in teal
SOURCE_MASK, TARGET_MASK = MASK, "#13808a"
SOURCE_STYLE = {"facecolor": "#fbefed", "edgecolor": SOURCE_MASK}
TARGET_STYLE = {"facecolor": "#e7f3f4", "edgecolor": TARGET_MASK}
CODE = 8  # font size of the PyTorch argument names in the mask boxes

ENCODER_DECODER = {
    "encoder": label("Encoder layer", "编码器层"),
    "decoder": label("Decoder layer", "解码器层"),
    "pre_norm": label("(pre-norm)", "（前归一化）"),
    "source": label("source tokens (padded)", "源序列词元（含填充）"),
    "target": label("target tokens, shifted right", "右移一位的目标词元（含填充）"),
    "start": label("start token, then", "起始词元后接"),
    "embed": label("Embedding + positional encoding", "嵌入 + 位置编码"),
    "self": label("Self-attention", "自注意力"),
    "qkv_source": label("from the source", "都来自源序列"),
    "causal_self": label("Causal self-attention", "因果自注意力"),
    "qkv_target": label("from the target", "都来自目标序列"),
    "cross": label("Cross-attention", "交叉注意力"),
    "from_decoder": label("from the decoder", "来自解码器"),
    "from_memory": label("from the memory", "来自 memory"),
    "norm": label("LayerNorm", "层归一化"),
    "final_norm": label("final LayerNorm", "最后的层归一化"),
    "ffn": label("Feed-forward network", "前馈网络"),
    "memory": label("memory (the encoder's output)", "memory（编码器输出）"),
    "linear": label("Linear", "线性层"),
    "logits": label("next-token logits", "下一个词元的 logits"),
    "predicts": label("each position predicts the next token", "每个位置预测下一个词元"),
    "source_mask": label("source padding mask", "源序列填充掩码"),
    "padding": label("True = padding", "True 表示填充"),
    "same_tensor": label("the encoder's mask again", "与编码器的掩码相同"),
    "target_mask": label("target mask", "目标掩码"),
    "causal": label("causal: no later keys", "因果：遮住之后的键"),
    "and_padding": label("and target padding", "以及目标序列的填充"),
    "note_1": label("One pre-norm layer of each (norm_first=True): each sub-layer reads a LayerNorm of the stream, and "
                    "the residual (green) adds its",
                    "编码器和解码器各画一层，都是前归一化（norm_first=True）：每个子层读取残差流经层归一化后的结果，"),
    "note_2": label("output back; each stack ends with a final LayerNorm. Dropout not drawn. Padding masks are bool "
                    "(B, L), True = padding.",
                    "残差连接（绿色）再把它的输出加回去；每个堆叠最后再接一个层归一化。图中未画 Dropout。填充掩码为布尔张量 (B, L)，True 表示填充。"),
}

#: heights of the parts, and the gaps between them: a wider one below a LayerNorm, where the
#: residual branches off
HEIGHT = {"tokens": 0.58, "embed": 0.5, "norm": 0.28, "self": 0.62, "cross": 0.7, "ffn": 0.46, "add": 0.28,
          "final": 0.3, "memory": 0.58, "linear": 0.36, "logits": 0.62}
GAP, BRANCH_GAP, R = 0.2, 0.36, 0.14  # R: the radius of an add
ENCODER = ("tokens", "embed", "norm", "self", "add", "norm", "ffn", "add", "final", "memory")
DECODER = ("tokens", "embed", "norm", "self", "add", "norm", "cross", "add", "norm", "ffn", "add", "final", "linear",
           "logits")


def _layout(parts, bottom):
    """The centre of each part, stacked from `bottom` up."""
    centres, y = [], bottom
    for index, part in enumerate(parts):
        if index:
            before = parts[index - 1]
            y += BRANCH_GAP if part == "norm" else 0.9 if before == "add" and part == "final" else GAP
        centres.append(y + HEIGHT[part] / 2)
        y += HEIGHT[part]
    return centres


def encoder_decoder(lang):
    """Source tokens → embedding + positional encoding → encoder layer (LayerNorm → self-attention
    with the source padding mask → add; LayerNorm → feed-forward → add) → final LayerNorm → memory;
    target tokens shifted right → embedding + positional encoding → decoder layer (LayerNorm →
    causal self-attention with the target mask → add; LayerNorm → cross-attention over the memory
    with the source padding mask → add; LayerNorm → feed-forward → add) → final LayerNorm → linear →
    next-token logits. Each residual runs up the left of its sub-layer."""
    s = ENCODER_DECODER
    bottom = 1.0
    enc_y, dec_y = _layout(ENCODER, bottom), _layout(DECODER, bottom)
    height = dec_y[-1] + HEIGHT["logits"] / 2 + 0.12
    sheet = Sheet(10.0, height, lang)
    enc, dec, box_w, wide, side = 1.75, 6.75, 2.3, 2.55, 1.38  # side: the residual line's distance from the centre
    enc_mask, dec_mask, enc_mask_w, dec_mask_w = 4.0, 9.08, 1.72, 1.78

    def panel(x, parts, centres, name):
        first = parts.index("norm")
        last = len(parts) - 1 - parts[::-1].index("add")
        low = centres[first] - HEIGHT["norm"] / 2 - BRANCH_GAP / 2 - 0.12
        top = centres[last] + R + 0.62  # the panel's title sits in the gap below the final LayerNorm
        sheet.ax.add_patch(FancyBboxPatch((x - side - 0.15, low), side + box_w / 2 + 0.3, top - low,
                                          boxstyle="round,pad=0,rounding_size=0.15", **PANEL))
        sheet.lines(x - side - 0.03, top - 0.3, [([name], SIZE, INK), ([s["pre_norm"]], SMALL, GREY)], ha="left")

    def add(x, y):
        sheet.ax.add_patch(FancyBboxPatch((x - R, y - R), 2 * R, 2 * R, boxstyle="circle,pad=0", linewidth=1.3,
                                          **OPERATION))
        sheet.line(x, y, ["$+$"], SIZE, INK)

    def mask_box(x, y, width, rows, style, target_x):
        box_h = sum(1.45 * size / 72 for _, size, _ in rows) + 0.12
        sheet.box(x, y, width, box_h, rows, style, rounded=True, dashed=True)
        sheet.arrow((x - width / 2, y), (target_x, y), color=style["edgecolor"], dashed=True)

    def column(x, parts, centres, boxes):
        """Draw the parts of one column, the main line between them and each sub-layer's residual."""
        for index, (part, y) in enumerate(zip(parts, centres)):
            if part == "add":
                add(x, y)
            elif part in ("norm", "final"):
                sheet.box(x, y, box_w, HEIGHT[part], [([s["norm" if part == "norm" else "final_norm"]], SIZE, INK)],
                          NORM)
            else:
                width, rows, style, rounded = boxes[part]
                sheet.box(x, y, width, HEIGHT[part], rows, style, rounded=rounded)
        for index in range(len(parts) - 1):
            start = centres[index] + (R if parts[index] == "add" else HEIGHT[parts[index]] / 2)
            end = centres[index + 1] - (R if parts[index + 1] == "add" else HEIGHT[parts[index + 1]] / 2)
            color = QKV["Q"] if parts[index + 1] == "cross" else INK
            sheet.arrow((x, start), (x, end), color=color)
        # the residuals: from a point below each sub-layer's LayerNorm, up the left, into its add
        for index, part in enumerate(parts):
            if part != "norm":
                continue
            add_index = parts.index("add", index)
            branch = centres[index] - HEIGHT["norm"] / 2 - BRANCH_GAP / 2
            sheet.dot(x, branch, color=IDENTITY)
            sheet.arrow((x, branch), (x - side, branch), (x - side, centres[add_index]), (x - R, centres[add_index]),
                        color=IDENTITY, width=2.0)

    # the encoder
    enc_boxes = {
        "tokens": (wide, [([s["source"]], SIZE, INK), (["$(B, L_s)$"], SMALL, INK)], TENSOR, True),
        "embed": (wide, [([s["embed"]], SIZE, INK), (["$(B, L_s, E)$"], SMALL, GREY)], OPERATION, False),
        "self": (box_w, [([s["self"]], SIZE, INK), (["$Q, K, V$", s["qkv_source"]], SMALL, GREY)], ATTENTION, False),
        "ffn": (box_w, [([s["ffn"]], SIZE, INK)], OPERATION, False),
        "memory": (wide, [([s["memory"]], SIZE, INK), (["$(B, L_s, E)$"], SMALL, INK)], TENSOR, True),
    }
    panel(enc, ENCODER, enc_y, s["encoder"])
    column(enc, ENCODER, enc_y, enc_boxes)
    source_rows = [([s["source_mask"]], SIZE, SOURCE_MASK), (["$(B, L_s)$"], SMALL, INK), ([s["padding"]], SMALL, INK)]
    mask_box(enc_mask, enc_y[ENCODER.index("self")], enc_mask_w,
             source_rows + [(["`src_key_padding_mask`"], CODE, GREY)], SOURCE_STYLE, enc + box_w / 2)

    # the decoder
    dec_boxes = {
        "tokens": (wide, [([s["target"]], SIZE, INK), ([s["start"], r"$y_1, y_2, \ldots$", "$(B, L_t)$"], SMALL, INK)],
                   TENSOR, True),
        "embed": (wide, [([s["embed"]], SIZE, INK), (["$(B, L_t, E)$"], SMALL, GREY)], OPERATION, False),
        "self": (box_w, [([s["causal_self"]], SIZE, INK), (["$Q, K, V$", s["qkv_target"]], SMALL, GREY)], ATTENTION,
                 False),
        "cross": (box_w, [([s["cross"]], SIZE, INK), (["$Q$", s["from_decoder"]], SMALL, GREY),
                          (["$K, V$", s["from_memory"]], SMALL, GREY)], ATTENTION, False),
        "ffn": (box_w, [([s["ffn"]], SIZE, INK)], OPERATION, False),
        "linear": (box_w, [([s["linear"], r"$E \to n_{\mathrm{vocab}}$"], SIZE, INK)], OPERATION, False),
        "logits": (box_w + 0.4, [([s["logits"], r"$(B, L_t, n_{\mathrm{vocab}})$"], SIZE, INK),
                                 ([s["predicts"]], SMALL, GREY)], RESULT, True),
    }
    panel(dec, DECODER, dec_y, s["decoder"])
    column(dec, DECODER, dec_y, dec_boxes)
    self_y, cross_y = dec_y[DECODER.index("self")], dec_y[DECODER.index("cross")]
    mask_box(dec_mask, self_y, dec_mask_w,
             [([s["target_mask"]], SIZE, TARGET_MASK), ([s["causal"]], SMALL, INK), ([s["and_padding"]], SMALL, INK),
              (["$(L_t, L_t)$", "+", "$(B, L_t)$"], SMALL, INK)], TARGET_STYLE, dec + box_w / 2)
    mask_box(dec_mask, cross_y, dec_mask_w,
             source_rows + [(["`memory_key_padding_mask`"], CODE, GREY), ([s["same_tensor"]], CODE, GREY)],
             SOURCE_STYLE, dec + box_w / 2)
    q_start = dec_y[DECODER.index("cross") - 1] + HEIGHT["norm"] / 2
    sheet.line(dec + 0.1, (q_start + cross_y - HEIGHT["cross"] / 2) / 2, ["$Q$"], SIZE, QKV["Q"], ha="left")

    # the memory gives the cross-attention its keys and values, from the left
    memory = enc_y[-1]
    left, entry = enc + wide / 2, dec - box_w / 2  # the memory box is a wide one
    for letter, dy, turn in (("K", 0.12, 4.85), ("V", -0.12, 4.6)):
        sheet.arrow((left, memory + dy), (turn, memory + dy), (turn, cross_y + dy), (entry, cross_y + dy),
                    color=QKV[letter])
    sheet.line(4.5, (memory + cross_y) / 2 + 0.15, [r"$K = MW_K$"], SIZE, QKV["K"], ha="right")
    sheet.line(4.5, (memory + cross_y) / 2 - 0.15, [r"$V = MW_V$"], SIZE, QKV["V"], ha="right")

    sheet.lines(0.15, 0.45, [([s["note_1"]], SMALL, GREY), ([s["note_2"]], SMALL, GREY)], ha="left")
    return sheet.figure
