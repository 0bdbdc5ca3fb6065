"""Diagram 01_sdpa (lesson 01): scaled dot-product attention, step by step."""

from .sheet import GREY, INK, MASK, OPERATION, OPTIONAL, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

SDPA = {
    "Q": label("queries Q", "查询 Q"),
    "K": label("keys K", "键 K"),
    "V": label("values V", "值 V"),
    "matmul": label("MatMul", "矩阵乘法"),
    "every_pair": label("every query against every key", "每个查询与每个键做点积"),
    "scale": label("Scale", "缩放"),
    "no_saturation": label("keeps softmax from saturating", "防止 softmax 饱和"),
    "mask": label("Mask (optional)", "掩码（可选）"),
    "mask_fill": label("where keep is False: score → −∞", "keep 为 False 处：分数 → −∞"),
    "softmax": label("Softmax over the keys", "对键做 softmax"),
    "last_axis": label("last axis, dim = −1: each row sums to 1", "最后一维 dim = −1：每行之和为 1"),
    "weights": label("weights", "注意力权重"),
    "average": label("a weighted average of the values", "对值加权平均"),
    "return": label("return", "返回"),
    "keep": label("keep mask", "保留掩码"),
    "may_attend": label("True = may attend", "True：可以关注"),
    "broadcasts": label("broadcasts to", "可广播为"),
    "scores": label("scores", "分数"),
    "scaled": label("scaled scores", "缩放后的分数"),
    "masked": label("masked scores", "遮蔽后的分数"),
    "attention_weights": label("attention weights", "注意力权重"),
    "output": label("output", "输出"),
    "legend_tensor": label("tensor", "张量"),
    "legend_operation": label("operation", "运算"),
    "legend_optional": label("optional", "可选"),
}


def sdpa(lang):
    """Scaled dot-product attention as a flow: Q, K, V → MatMul → Scale → Mask (optional) →
    Softmax → MatMul with V → (output, weights), the shape of every tensor beside it."""
    s = SDPA
    sheet = Sheet(8.0, 6.9, lang)
    cx, op_w, op_h = 3.55, 2.7, 0.56
    half = op_h / 2
    top, matmul, scale, mask, softmax, combine, result = 6.4, 5.35, 4.45, 3.55, 2.65, 1.45, 0.45
    side = 0.12  # gap between an arrow and the labels beside it

    def beside(y, name, shape):
        if name:
            sheet.line(cx - side, y, [name], SMALL, GREY, ha="right")
        sheet.line(cx + side, y, [shape], SIZE, INK, ha="left")

    # the inputs
    inputs = {"Q": (2.45, "$(B, L_q, d_k)$"), "K": (4.65, "$(B, L_k, d_k)$"), "V": (6.85, "$(B, L_k, d_v)$")}
    for letter, (x, shape) in inputs.items():
        sheet.box(x, top, 1.8, 0.62, [([s[letter]], SIZE, QKV[letter]), ([shape], SIZE, INK)], TENSOR, rounded=True)
    for letter in "QK":  # straight down: both inputs sit above the MatMul box
        x = inputs[letter][0]
        sheet.arrow((x, top - 0.31), (x, matmul + half), color=QKV[letter])

    # the chain of operations, each arrow labelled with the tensor it carries
    sheet.box(cx, matmul, op_w, op_h, [([s["matmul"], r"$QK^{\top}$"], SIZE, INK),
                                       ([s["every_pair"]], SMALL, GREY)], OPERATION)
    sheet.arrow((cx, matmul - half), (cx, scale + half))
    beside((matmul + scale) / 2, s["scores"], "$(B, L_q, L_k)$")
    sheet.box(cx, scale, op_w, op_h, [([s["scale"], r"$\div\ \sqrt{d_k}$"], SIZE, INK),
                                      ([s["no_saturation"]], SMALL, GREY)], OPERATION)
    sheet.arrow((cx, scale - half), (cx, mask + half))
    beside((scale + mask) / 2, s["scaled"], "$(B, L_q, L_k)$")
    sheet.box(cx, mask, op_w, op_h, [([s["mask"]], SIZE, MASK), ([s["mask_fill"]], SMALL, GREY)],
              OPTIONAL, dashed=True)
    sheet.box(1.0, mask, 1.75, 0.95, [([s["keep"]], SIZE, MASK), ([s["may_attend"]], SMALL, INK),
                                      ([s["broadcasts"]], SMALL, GREY), (["$(B, L_q, L_k)$"], SMALL, INK)],
              OPTIONAL, rounded=True, dashed=True)
    sheet.arrow((1.875, mask), (cx - op_w / 2, mask), color=MASK, dashed=True)
    sheet.arrow((cx, mask - half), (cx, softmax + half))
    beside((mask + softmax) / 2, s["masked"], "$(B, L_q, L_k)$")
    sheet.box(cx, softmax, op_w, op_h, [([s["softmax"]], SIZE, INK), ([s["last_axis"]], SMALL, GREY)], OPERATION)

    # the weights go on to the values and are returned too
    sheet.arrow((cx, softmax - half), (cx, combine + half))
    label_y, branch_y = softmax - half - 0.2, combine + half + 0.22
    beside(label_y, s["attention_weights"], "$(B, L_q, L_k)$")
    sheet.dot(cx, branch_y)
    left = 0.55
    sheet.arrow((cx, branch_y), (left, branch_y), (left, result), (cx - op_w / 2, result))
    sheet.box(cx, combine, op_w, op_h, [([s["matmul"], s["weights"], r"$\cdot$", "$V$"], SIZE, INK),
                                        ([s["average"]], SMALL, GREY)], OPERATION)
    v = inputs["V"][0]
    sheet.arrow((v, top - 0.31), (v, combine), (cx + op_w / 2, combine), color=QKV["V"])
    sheet.arrow((cx, combine - half), (cx, result + 0.25))
    beside((combine - half + result + 0.25) / 2, s["output"], "$(B, L_q, d_v)$")
    sheet.box(cx, result, op_w, 0.5, [([s["return"], "`(output, weights)`"], SIZE, INK)], RESULT, rounded=True)

    # legend
    sheet.legend(5.75, 0.85, [(s["legend_tensor"], TENSOR, True, False),
                              (s["legend_operation"], OPERATION, False, False),
                              (s["legend_optional"], OPTIONAL, False, True)])
    return sheet.figure
