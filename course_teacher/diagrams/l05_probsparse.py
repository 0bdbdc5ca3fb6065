"""Diagram 05_probsparse (lesson 05): ProbSparse attention (Informer) as a flow, for one batch
element and one head: sample keys, score each query on its sample only, rate the queries by
M̄ = max − mean (the estimate of the paper's sparsity measure M), give the top u full attention
and every other (lazy) query the mean of the values;
the output's rows come from both branches."""

from course_utils.validation import describe, fail
from .sheet import GREY, INK, OPERATION, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

PROBSPARSE = {
    "Q": label("queries Q", "查询 Q"),
    "K": label("keys K", "键 K"),
    "V": label("values V", "值 V"),
    "sample": label("Sample", "每个查询采样"),
    "keys_per_query": label("keys per query", "个键"),
    "own_sample": label("score each query on its own sample only", "每个查询只与自己采到的键做点积"),
    "sampled_scores": label("sampled scores", "采样分数"),
    "not": label("not", "而不是"),
    "measure": label("Estimated sparsity measure", "稀疏性度量的估计"),
    "measure_formula": label(r"$\bar{M} = \mathrm{max} - \mathrm{mean}$", r"$\bar{M}$"),
    "max_minus_mean": label("of each query's sampled scores", "= 每个查询采样分数的最大值 − 均值"),
    "one_per_query": label("one per query", "每个查询一个"),
    "top": label("Top", "选出"),
    "top_queries": label("queries", "个查询"),
    "by": label("by", "按"),
    "largest": label("largest", "最大的"),
    "other": label("the other", "其余"),
    "other_queries": label("queries", "个查询"),
    "all": label("all", "全部"),
    "all_keys": label("keys", "个键"),
    "active": label("active queries: full attention", "个活跃查询：完整注意力"),
    "weights": label("weights", "注意力权重"),
    "active_causal": label("causal: keys up to its own position", "因果模式下只关注自身位置及之前的键"),
    "lazy": label("lazy queries", "个惰性查询"),
    "every_row": label("every row:", "每一行都取均值"),
    "lazy_causal": label("causal: cumulative mean of", "因果模式下取累积均值"),
    "cumulative": label(r"$v_0 \ldots v_i$", r"$\mathrm{mean}(v_0 \ldots v_i)$"),
    "output": label("output", "输出"),
    "rows": label("its rows come from both branches", "各行分别来自两个分支"),
    "legend_tensor": label("tensor", "张量"),
    "legend_operation": label("operation", "运算"),
    "legend_result": label("result", "结果"),
    "note": label("One batch item and one head shown (B, H omitted); c = factor, 5 by default.",
                  "图中只画出一个样本的一个头（省略 B、H）；c 即 factor，默认为 5。"),
}

U_FORMULA = r"$U = c\,\lceil \ln L_K \rceil$"
SMALL_U_FORMULA = r"$u = c\,\lceil \ln L_Q \rceil$"


def probsparse(lang):
    """ProbSparse attention as a flow: Q, K → sample U keys per query and score → sparsity
    measure M̄ → top-u queries → active queries get softmax(Q_u Kᵀ/√D) V, lazy ones mean(V)
    (causal: the cumulative mean) → output, its rows filled in from both branches."""
    if lang not in ("en", "zh"):
        fail("probsparse", "lang", describe(lang), {"en": "'en' or 'zh'", "zh": "'en' 或 'zh'"})
    s = PROBSPARSE
    sheet = Sheet(8.6, 7.7, lang)
    cx, op_w, op_h = 4.3, 3.5, 0.56
    half = op_h / 2
    top, sample, measure, select, branch, result = 7.15, 6.1, 5.0, 3.9, 2.45, 0.95
    in_h, branch_w, branch_h = 0.62, 2.9, 1.0
    lazy, active = 1.75, 6.85  # the branches' centres
    side = 0.12  # gap between an arrow and the labels beside it

    def beside(y, name, shape, after=None):
        sheet.line(cx - side, y, [name], SMALL, GREY, ha="right")
        width = sheet.line(cx + side, y, [shape], SIZE, INK, ha="left")
        if after:
            sheet.line(cx + side + width + 0.08, y, after, SMALL, GREY, ha="left")

    # the inputs Q and K, straight down into the sampling step
    inputs = {"Q": (cx - 1.2, "$(L_Q, D)$"), "K": (cx + 1.2, "$(L_K, D)$")}
    for letter, (x, shape) in inputs.items():
        sheet.box(x, top, 1.8, in_h, [([s[letter]], SIZE, QKV[letter]), ([shape], SIZE, INK)], TENSOR, rounded=True)
        sheet.arrow((x, top - in_h / 2), (x, sample + half), color=QKV[letter])

    # the chain: sample and score, measure, select
    sheet.box(cx, sample, op_w, op_h, [([s["sample"], U_FORMULA, s["keys_per_query"]], SIZE, INK),
                                       ([s["own_sample"]], SMALL, GREY)], OPERATION)
    sheet.arrow((cx, sample - half), (cx, measure + half))
    beside((sample + measure) / 2, s["sampled_scores"], "$(L_Q, U)$", [s["not"], "$(L_Q, L_K)$"])
    sheet.box(cx, measure, op_w, op_h, [([s["measure"], r"$\bar{M}$"], SIZE, INK),
                                        ([s["measure_formula"], s["max_minus_mean"]], SMALL, GREY)],
              OPERATION)
    sheet.arrow((cx, measure - half), (cx, select + half))
    beside((measure + select) / 2, s["one_per_query"], r"$(L_Q,\!)$")
    if lang == "zh":
        title = [s["top"], r"$\bar{M}$", s["largest"], "$u$", s["top_queries"]]
    else:
        title = [s["top"], "$u$", s["top_queries"], s["by"], r"$\bar{M}$"]
    sheet.box(cx, select, op_w, op_h, [(title, SIZE, INK), ([SMALL_U_FORMULA], SMALL, GREY)], OPERATION)

    # K goes on, whole, to the active queries; the chosen rows of Q go there too
    k = inputs["K"][0]
    k_y, k_x = top - in_h / 2 - 0.22, 7.9
    sheet.dot(k, k_y, color=QKV["K"])
    sheet.arrow((k, k_y), (k_x, k_y), (k_x, branch + branch_h / 2), color=QKV["K"])
    sheet.line(k_x - side, measure, [s["all"], "$L_K$", s["all_keys"]], SMALL, QKV["K"], ha="right")
    q_x = cx + op_w / 2 + 0.45
    sheet.arrow((cx + op_w / 2, select), (q_x, select), (q_x, branch + branch_h / 2), color=QKV["Q"])
    sheet.line(q_x + 0.1, (select - half + branch + branch_h / 2) / 2, ["$Q_u$", "$(u, D)$"], SIZE, QKV["Q"],
               ha="left")
    # the other queries go to the lazy branch
    sheet.arrow((cx - op_w / 2, select), (lazy, select), (lazy, branch + branch_h / 2))
    sheet.line(lazy + 0.1, (select - half + branch + branch_h / 2) / 2, [s["other"], "$L_Q - u$", s["other_queries"]],
               SMALL, GREY, ha="left")

    # the two branches, with V between them
    sheet.box(active, branch, branch_w, branch_h,
              [(["$u$", s["active"]], SIZE, INK),
               ([r"$\mathrm{softmax}(Q_u K^{\top} / \sqrt{D})\,V$"], SIZE, INK),
               ([s["weights"], "$(u, L_K)$"], SMALL, GREY),
               ([s["active_causal"]], SMALL, GREY)], OPERATION)
    sheet.box(lazy, branch, branch_w, branch_h,
              [(["$L_Q - u$", s["lazy"]], SIZE, INK),
               ([s["every_row"], r"$\mathrm{mean}(V)$"], SIZE, INK),
               ([s["lazy_causal"], s["cumulative"]], SMALL, GREY)], OPERATION)
    v_w = 1.2
    sheet.box(cx, branch, v_w, in_h, [([s["V"]], SIZE, QKV["V"]), (["$(L_K, D_v)$"], SIZE, INK)], TENSOR, rounded=True)
    sheet.arrow((cx + v_w / 2, branch), (active - branch_w / 2, branch), color=QKV["V"])
    sheet.arrow((cx - v_w / 2, branch), (lazy + branch_w / 2, branch), color=QKV["V"])

    # the output: its rows come from both branches
    out_w = 3.0
    sheet.box(cx, result, out_w, 0.6, [([s["output"], "$(L_Q, D_v)$"], SIZE, INK), ([s["rows"]], SMALL, GREY)],
              RESULT, rounded=True)
    rows_y = (branch - branch_h / 2 + result) / 2
    sheet.arrow((active, branch - branch_h / 2), (active, result), (cx + out_w / 2, result))
    sheet.line(active + side, rows_y, ["$(u, D_v)$"], SIZE, INK, ha="left")
    sheet.arrow((lazy, branch - branch_h / 2), (lazy, result), (cx - out_w / 2, result))
    sheet.line(lazy - side, rows_y, ["$(L_Q - u, D_v)$"], SIZE, INK, ha="right")

    sheet.legend(7.2, 0.85, [(s["legend_tensor"], TENSOR, True, False),
                             (s["legend_operation"], OPERATION, False, False),
                             (s["legend_result"], RESULT, True, False)])
    sheet.line(0.15, 0.25, [s["note"]], SMALL, GREY, ha="left")
    return sheet.figure
