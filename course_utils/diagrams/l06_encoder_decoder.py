"""Diagram 06_encoder_decoder (lesson 06): a one-layer encoder–decoder, the input at the bottom.
The encoder turns the source tokens into the memory; the decoder reads the target tokens shifted
right (a start token first) and predicts the next token at every position. Two masks, drawn in
two colours: the source padding mask (used twice: in the encoder's self-attention and in the
decoder's cross-attention, over the memory) and the target mask (causal and target padding, in the
decoder's self-attention)."""

from matplotlib.patches import FancyBboxPatch

from .l06_encoder_layer import NORM
from .sheet import ATTENTION, GREY, INK, MASK, OPERATION, PANEL, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

#: the two masks: the source padding mask in the course's mask red, the target mask in teal
SOURCE_MASK, TARGET_MASK = MASK, "#13808a"
SOURCE_STYLE = {"facecolor": "#fbefed", "edgecolor": SOURCE_MASK}
TARGET_STYLE = {"facecolor": "#e7f3f4", "edgecolor": TARGET_MASK}
CODE = 8  # font size of the PyTorch argument names in the mask boxes

ENCODER_DECODER = {
    "encoder": label("Encoder layer", "编码器层"),
    "decoder": label("Decoder layer", "解码器层"),
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
    "add_norm": label("Add & LayerNorm", "残差相加与层归一化"),
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
    "note_1": label("One post-norm layer of each: Add & LayerNorm = residual add, then LayerNorm; dropout not drawn.",
                    "编码器和解码器各画一层（后归一化）：先做残差相加，再做层归一化；图中未画 Dropout。"),
    "note_2": label("Padding masks are bool (B, L), True = padding, as PyTorch takes them. The causal mask hides "
                    "the keys after each query.",
                    "填充掩码与 PyTorch 的约定相同：布尔张量 (B, L)，True 表示填充。因果掩码遮住每个查询之后的键。"),
}


def encoder_decoder(lang):
    """Source tokens → embedding + positional encoding → encoder layer (self-attention with the
    source padding mask, feed-forward) → memory; target tokens shifted right → embedding +
    positional encoding → decoder layer (causal self-attention with the target mask,
    cross-attention over the memory with the source padding mask, feed-forward) → linear →
    next-token logits."""
    s = ENCODER_DECODER
    sheet = Sheet(9.45, 8.5, lang)
    enc, dec, box_w = 1.47, 6.15, 2.3
    enc_mask, dec_mask, enc_mask_w, dec_mask_w = 3.8, 8.5, 1.6, 1.78
    tokens, embed, attention, norm1, cross, norm2, ffn, norm3, linear, logits = (
        1.05, 1.87, 2.76, 3.5, 4.36, 5.12, 5.8, 6.48, 7.37, 8.05)
    memory = norm3
    tok_h, emb_h, att_h, norm_h, ffn_h = 0.58, 0.5, 0.62, 0.3, 0.5
    cross_h, wide = 0.7, 2.55  # the tokens' and the embeddings' boxes are wider than the layers' boxes

    def panel(x, bottom, top, name):
        sheet.ax.add_patch(FancyBboxPatch((x - box_w / 2 - 0.15, bottom), box_w + 0.3, top - bottom,
                                          boxstyle="round,pad=0,rounding_size=0.15", **PANEL))
        sheet.line(x - box_w / 2 - 0.03, top - 0.18, [name], SIZE, INK, ha="left")

    def add_norm(x, y):
        sheet.box(x, y, box_w, norm_h, [([s["add_norm"]], SIZE, INK)], NORM)

    def up(x, y0, y1, color=INK):
        sheet.arrow((x, y0), (x, y1), color=color)

    def mask_box(x, y, width, rows, style, target_x):
        height = sum(1.45 * size / 72 for _, size, _ in rows) + 0.12
        sheet.box(x, y, width, height, rows, style, rounded=True, dashed=True)
        sheet.arrow((x - width / 2, y), (target_x, y), color=style["edgecolor"], dashed=True)

    panel(enc, attention - att_h / 2 - 0.2, norm2 + norm_h / 2 + 0.45, s["encoder"])
    panel(dec, attention - att_h / 2 - 0.2, norm3 + norm_h / 2 + 0.45, s["decoder"])

    # the encoder: source tokens → embedding → self-attention → add & norm → FFN → add & norm → memory
    sheet.box(enc, tokens, wide, tok_h, [([s["source"]], SIZE, INK), (["$(B, L_s)$"], SMALL, INK)],
              TENSOR, rounded=True)
    up(enc, tokens + tok_h / 2, embed - emb_h / 2)
    sheet.box(enc, embed, wide, emb_h, [([s["embed"]], SIZE, INK), (["$(B, L_s, E)$"], SMALL, GREY)], OPERATION)
    up(enc, embed + emb_h / 2, attention - att_h / 2)
    sheet.box(enc, attention, box_w, att_h, [([s["self"]], SIZE, INK), (["$Q, K, V$", s["qkv_source"]], SMALL, GREY)],
              ATTENTION)
    up(enc, attention + att_h / 2, norm1 - norm_h / 2)
    add_norm(enc, norm1)
    up(enc, norm1 + norm_h / 2, cross - ffn_h / 2)
    sheet.box(enc, cross, box_w, ffn_h, [([s["ffn"]], SIZE, INK)], OPERATION)
    up(enc, cross + ffn_h / 2, norm2 - norm_h / 2)
    add_norm(enc, norm2)
    memory_h = 0.58
    up(enc, norm2 + norm_h / 2, memory - memory_h / 2)
    sheet.box(enc, memory, box_w, memory_h, [([s["memory"]], SIZE, INK), (["$(B, L_s, E)$"], SMALL, INK)],
              TENSOR, rounded=True)
    source_rows = [([s["source_mask"]], SIZE, SOURCE_MASK), (["$(B, L_s)$"], SMALL, INK), ([s["padding"]], SMALL, INK)]
    mask_box(enc_mask, attention, enc_mask_w, source_rows + [(["`src_key_padding_mask`"], CODE, GREY)],
             SOURCE_STYLE, enc + box_w / 2)

    # the decoder: target tokens → embedding → causal self-attention → add & norm → cross-attention
    # → add & norm → FFN → add & norm → linear → logits
    sheet.box(dec, tokens, wide, tok_h, [([s["target"]], SIZE, INK),
                                          ([s["start"], r"$y_1, y_2, \ldots$", "$(B, L_t)$"], SMALL, INK)],
              TENSOR, rounded=True)
    up(dec, tokens + tok_h / 2, embed - emb_h / 2)
    sheet.box(dec, embed, wide, emb_h, [([s["embed"]], SIZE, INK), (["$(B, L_t, E)$"], SMALL, GREY)], OPERATION)
    up(dec, embed + emb_h / 2, attention - att_h / 2)
    sheet.box(dec, attention, box_w, att_h, [([s["causal_self"]], SIZE, INK),
                                             (["$Q, K, V$", s["qkv_target"]], SMALL, GREY)], ATTENTION)
    mask_box(dec_mask, attention, dec_mask_w,
             [([s["target_mask"]], SIZE, TARGET_MASK), ([s["causal"]], SMALL, INK), ([s["and_padding"]], SMALL, INK),
              (["$(L_t, L_t)$", "+", "$(B, L_t)$"], SMALL, INK)], TARGET_STYLE, dec + box_w / 2)
    up(dec, attention + att_h / 2, norm1 - norm_h / 2)
    add_norm(dec, norm1)
    up(dec, norm1 + norm_h / 2, cross - cross_h / 2, color=QKV["Q"])
    sheet.line(dec + 0.1, (norm1 + norm_h / 2 + cross - cross_h / 2) / 2, ["$Q$"], SIZE, QKV["Q"], ha="left")
    sheet.box(dec, cross, box_w, cross_h, [([s["cross"]], SIZE, INK), (["$Q$", s["from_decoder"]], SMALL, GREY),
                                           (["$K, V$", s["from_memory"]], SMALL, GREY)], ATTENTION)
    mask_box(dec_mask, cross, dec_mask_w,
             source_rows + [(["`memory_key_padding_mask`"], CODE, GREY), ([s["same_tensor"]], CODE, GREY)],
             SOURCE_STYLE, dec + box_w / 2)
    up(dec, cross + cross_h / 2, norm2 - norm_h / 2)
    add_norm(dec, norm2)
    up(dec, norm2 + norm_h / 2, ffn - ffn_h / 2)
    sheet.box(dec, ffn, box_w, ffn_h, [([s["ffn"]], SIZE, INK)], OPERATION)
    up(dec, ffn + ffn_h / 2, norm3 - norm_h / 2)
    add_norm(dec, norm3)
    linear_h, logits_h = 0.36, 0.62
    up(dec, norm3 + norm_h / 2, linear - linear_h / 2)
    sheet.box(dec, linear, box_w, linear_h, [([s["linear"], r"$E \to n_{\mathrm{vocab}}$"], SIZE, INK)], OPERATION)
    up(dec, linear + linear_h / 2, logits - logits_h / 2)
    sheet.box(dec, logits, box_w + 0.4, logits_h, [([s["logits"], r"$(B, L_t, n_{\mathrm{vocab}})$"], SIZE, INK),
                                                   ([s["predicts"]], SMALL, GREY)], RESULT, rounded=True)

    # the memory gives the cross-attention its keys and values
    left, entry = enc + box_w / 2, dec - box_w / 2
    for letter, dy, turn in (("K", 0.12, 4.45), ("V", -0.12, 4.2)):
        sheet.arrow((left, memory + dy), (turn, memory + dy), (turn, cross + dy), (entry, cross + dy),
                    color=QKV[letter])
    sheet.line(4.1, (memory + cross) / 2 + 0.15, [r"$K = MW_K$"], SIZE, QKV["K"], ha="right")
    sheet.line(4.1, (memory + cross) / 2 - 0.15, [r"$V = MW_V$"], SIZE, QKV["V"], ha="right")

    sheet.lines(0.15, 0.38, [([s["note_1"]], SMALL, GREY), ([s["note_2"]], SMALL, GREY)], ha="left")
    return sheet.figure
