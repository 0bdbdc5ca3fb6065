"""Diagram 03_qkv_sources (lesson 03): where Q, K and V come from in an encoder and a decoder."""

from matplotlib.patches import FancyBboxPatch

from .sheet import ATTENTION, GREY, INK, MASK, PANEL, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

SOURCES = {
    "encoder": label("Encoder", "编码器"),
    "decoder": label("Decoder", "解码器"),
    "source": label("source sequence: the encoder's states", "源序列：编码器的状态"),
    "target": label("target sequence: the decoder's states", "目标序列：解码器的状态"),
    "self": label("self-attention", "自注意力"),
    "cross": label("cross-attention", "交叉注意力"),
    "weights": label("weights", "注意力权重"),
    "source_padding": label("mask: source padding, on the keys", "掩码：源序列的填充，作用于键"),
    "causal_padding": label("mask: causal and target padding", "掩码：因果掩码与目标序列的填充"),
    "memory": label("memory (the encoder's output)", "memory（编码器输出）"),
    "from_decoder": label("from the decoder", "来自解码器"),
    "from_encoder": label("from the encoder", "来自编码器"),
    "output": label("decoder output", "解码器的输出"),
    "note": label("Keep masks: True = may attend. One layer of each; residuals, normalization and "
               "feed-forward omitted.",
               "保留掩码：True 表示可以关注。编码器和解码器各画一层，省略了残差连接、归一化和前馈网络。"),
}


def qkv_sources(lang):
    """Where Q, K and V come from: encoder self-attention, decoder self-attention and
    cross-attention, with the sequence lengths and the mask each one applies."""
    s = SOURCES
    sheet = Sheet(8.0, 6.6, lang)
    enc, dec, width = 1.8, 6.2, 3.0
    header, inputs, attention, cross, output = 6.2, 5.5, 4.0, 2.45, 1.15
    in_h, att_h = 0.6, 1.05

    for x, name, bottom in ((enc, s["encoder"], cross - 0.55), (dec, s["decoder"], output - 0.5)):
        sheet.ax.add_patch(FancyBboxPatch((x - width / 2 - 0.2, bottom), width + 0.4, header + 0.25 - bottom,
                                          boxstyle="round,pad=0,rounding_size=0.15", **PANEL))
        sheet.line(x, header, [name], 11, INK)

    def attention_box(x, y, title, weights, mask, mask_shape):
        sheet.box(x, y, width, att_h, [([title], SIZE, INK), ([s["weights"], weights], SMALL, INK),
                                       ([mask], SMALL, MASK), (mask_shape, SMALL, MASK)], ATTENTION)

    def projections(x, name):
        for offset, letter in zip((-1.05, 0.0, 1.05), "QKV"):
            a = x + offset - 0.2
            sheet.arrow((a, inputs - in_h / 2), (a, attention + att_h / 2), color=QKV[letter])
            sheet.line(a + 0.07, (inputs - in_h / 2 + attention + att_h / 2) / 2,
                       [f"${letter} = {name}W_{letter}$"], SIZE, QKV[letter], ha="left")

    # encoder: self-attention over the source; its output is the memory
    sheet.box(enc, inputs, width, in_h, [([s["source"]], SIZE, INK), (["$X$", "$(B, L_{src}, d)$"], SIZE, INK)],
              TENSOR, rounded=True)
    projections(enc, "X")
    attention_box(enc, attention, s["self"], "$(B, L_{src}, L_{src})$", s["source_padding"], ["$(B, 1, L_{src})$"])
    memory_h = 0.6
    sheet.arrow((enc, attention - att_h / 2), (enc, cross + memory_h / 2))
    sheet.line(enc + 0.1, (attention - att_h / 2 + cross + memory_h / 2) / 2, ["$(B, L_{src}, d)$"], SIZE, INK,
               ha="left")
    sheet.box(enc, cross, width, memory_h, [([s["memory"]], SIZE, INK), (["$M$", "$(B, L_{src}, d)$"], SIZE, INK)],
              TENSOR, rounded=True)

    # decoder: causal self-attention over the target, then cross-attention into the memory
    sheet.box(dec, inputs, width, in_h, [([s["target"]], SIZE, INK), (["$Y$", "$(B, L_{tgt}, d)$"], SIZE, INK)],
              TENSOR, rounded=True)
    projections(dec, "Y")
    attention_box(dec, attention, s["self"], "$(B, L_{tgt}, L_{tgt})$", s["causal_padding"],
                  ["$(L_{tgt}, L_{tgt})$", "`&`", "$(B, 1, L_{tgt})$"])
    q = dec
    sheet.arrow((q, attention - att_h / 2), (q, cross + att_h / 2), color=QKV["Q"])
    middle = (attention - att_h / 2 + cross + att_h / 2) / 2
    sheet.line(q + 0.08, middle, ["$Q$", s["from_decoder"]], SIZE, QKV["Q"], ha="left")
    sheet.line(q - 0.08, middle, ["$(B, L_{tgt}, d)$"], SIZE, INK, ha="right")
    attention_box(dec, cross, s["cross"], "$(B, L_{tgt}, L_{src})$", s["source_padding"], ["$(B, 1, L_{src})$"])
    gap_left, gap_right = enc + width / 2, dec - width / 2
    for letter, dy in (("K", 0.14), ("V", -0.14)):
        sheet.arrow((gap_left, cross + dy), (gap_right, cross + dy), color=QKV[letter])
        sheet.line((gap_left + gap_right) / 2, cross + dy + (0.13 if dy > 0 else -0.13),
                   [f"${letter} = MW_{letter}$"], SIZE, QKV[letter])
    sheet.line((gap_left + gap_right) / 2, cross + 0.52, [s["from_encoder"]], SMALL, GREY)
    sheet.arrow((dec, cross - att_h / 2), (dec, output + 0.25))
    sheet.box(dec, output, width, 0.5, [([s["output"], "$(B, L_{tgt}, d)$"], SIZE, INK)], RESULT, rounded=True)

    sheet.line(0.15, 0.3, [s["note"]], SMALL, GREY, ha="left")
    return sheet.figure
