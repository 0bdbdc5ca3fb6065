"""The message catalogue: every sentence the package says to a learner, in English and Chinese.

A notebook picks its language once, through ``course_utils.setup(lang=...)``; everything the
package prints afterwards (check verdicts, error messages, widget labels) follows it.
"""

LANGUAGES = ("en", "zh")

_current = "en"

MESSAGES = {
    # check verdicts
    "check.passed": {
        "en": "✅ {exercise}: passed on {cases} test cases.",
        "zh": "✅ {exercise}：{cases} 组测试全部通过。",
    },
    "check.mistake": {
        "en": "❌ {exercise}: not yet. Diagnosis: {code}. {hint}",
        "zh": "❌ {exercise}：还不对。诊断：{code}。{hint}",
    },
    "check.mismatch": {
        "en": "❌ {exercise}: not yet. {detail}",
        "zh": "❌ {exercise}：还不对。{detail}",
    },
    "check.not_attempted": {
        "en": "⏳ {exercise}: not attempted yet. Replace the `raise NotImplementedError` with your code.",
        "zh": "⏳ {exercise}：尚未作答。请把 `raise NotImplementedError` 换成你的代码。",
    },
    "check.crashed": {
        "en": "💥 {exercise}: your function raised {error} on test case {case}: {text}",
        "zh": "💥 {exercise}：你的函数在第 {case} 组测试中抛出了 {error}：{text}",
    },
    "check.unknown_exercise": {
        "en": "check: argument 'exercise' got {got!r}; needs one of {known}.",
        "zh": "check：参数 exercise 收到 {got!r}；应为以下之一：{known}。",
    },
    "check.not_callable": {
        "en": "check: argument 'function' got {got}; needs the function you wrote (pass it without calling it).",
        "zh": "check：参数 function 收到 {got}；应传入你写的函数本身（不要加括号调用）。",
    },
    # what differs, when no known mistake explains it
    "diff.type": {
        "en": "Case {case}: {where} should be {expected}, but your function returned {got}.",
        "zh": "第 {case} 组测试：{where}应为 {expected}，你的函数却返回了 {got}。",
    },
    "diff.length": {
        "en": "Case {case}: {where} should hold {expected} items, but yours holds {got}.",
        "zh": "第 {case} 组测试：{where}应包含 {expected} 项，你的结果有 {got} 项。",
    },
    "diff.shape": {
        "en": "Case {case}: {where} should have shape {expected}, but yours has shape {got}.",
        "zh": "第 {case} 组测试：{where}的形状应为 {expected}，你的结果是 {got}。",
    },
    "diff.nan": {
        "en": "Case {case}: {where} contains NaN at index {index}; the reference has none there.",
        "zh": "第 {case} 组测试：{where}在索引 {index} 处出现 NaN，参考答案在该处没有 NaN。",
    },
    "diff.value": {
        "en": "Case {case}: {where} differs from the reference by up to {diff:.3g}, at index {index} (yours {got:.4g}, expected {expected:.4g}).",
        "zh": "第 {case} 组测试：{where}与参考答案最多相差 {diff:.3g}，位于索引 {index}（你的值 {got:.4g}，应为 {expected:.4g}）。",
    },
    "diff.equal": {
        "en": "Case {case}: {where} should be {expected!r}, but yours is {got!r}.",
        "zh": "第 {case} 组测试：{where}应为 {expected!r}，你的结果是 {got!r}。",
    },
    "diff.result": {"en": "the result", "zh": "返回值"},
    "diff.item": {"en": "item {index} of the result", "zh": "返回值的第 {index} 项"},
    # plot labels
    "plot.key": {"en": "key", "zh": "键（key）"},
    "plot.query": {"en": "query", "zh": "查询（query）"},
    # lesson 00 (widgets, plots): keys start with "l00."
    "l00.plot.memory": {"en": "memory", "zh": "内存"},
    "l00.plot.index_order": {"en": "index order", "zh": "索引顺序"},
    "l00.plot.result": {"en": "result", "zh": "结果"},
    "l00.plot.head": {"en": "head {h}", "zh": "头 {h}"},
    "l00.permute.order": {"en": "permutation", "zh": "维度顺序"},
    "l00.permute.contiguous": {"en": "then .contiguous()", "zh": "再调用 .contiguous()"},
    "l00.permute.summary": {
        "en": "{code}\nshape {shape}, stride {stride}, contiguous: {contiguous}\nshares memory with x: {shares} ({kind})",
        "zh": "{code}\n形状 {shape}，步长 {stride}，连续：{contiguous}\n与 x 共享内存：{shares}（{kind}）",
    },
    "l00.view": {"en": "a view", "zh": "视图"},
    "l00.copy": {"en": "a copy", "zh": "副本"},
    "l00.broadcast.mask": {"en": "mask", "zh": "掩码"},
    "l00.broadcast.scores": {"en": "scores", "zh": "分数"},
    "l00.broadcast.ok": {
        "en": "mask {mask} with scores {scores} → result {result}",
        "zh": "掩码 {mask} 与分数 {scores} → 结果 {result}",
    },
    "l00.broadcast.clash": {
        "en": "mask {mask} with scores {scores} → error: on axis {axis} the sizes {size_mask} and {size_scores} "
        "differ and neither is 1",
        "zh": "掩码 {mask} 与分数 {scores} → 报错：第 {axis} 维的大小 {size_mask} 与 {size_scores} 不同，且都不为 1",
    },
    "l00.broadcast.aligned": {
        "en": "the mask's axes line up with the scores axes {names}",
        "zh": "掩码的各维依次与分数的 {names} 维对齐",
    },
    # lesson 01 (widgets, plots): keys start with "l01."
    "l01.score_additive": {"en": "additive", "zh": "加性"},
    "l01.score_bilinear": {"en": "bilinear", "zh": "双线性"},
    "l01.score_dot": {"en": "dot", "zh": "点积"},
    "l01.score_scaled_dot": {"en": "scaled dot", "zh": "缩放点积"},
    "l01.weight": {"en": "weight", "zh": "权重"},
    "l01.score": {"en": "score", "zh": "分数"},
    "l01.density": {"en": "density", "zh": "密度"},
    "l01.standard_normal": {"en": "standard normal", "zh": "标准正态分布"},
    "l01.uniform": {"en": "uniform, 1/{keys}", "zh": "均匀分布 1/{keys}"},
    "l01.variance_title": {"en": "variance of the scores", "zh": "分数的方差"},
    "l01.max_weight_title": {
        "en": "largest softmax weight (mean, {keys} keys)",
        "zh": "最大 softmax 权重（均值，{keys} 个键）",
    },
    "l01.gradient_title": {
        "en": "size of the softmax gradient (mean ‖J‖)",
        "zh": "softmax 梯度的大小（‖J‖ 的均值）",
    },
    "l01.divide_by_sqrt": {"en": "divide by √d_k", "zh": "除以 √d_k"},
    "l01.scaled": {"en": "divided by √d_k", "zh": "除以 √d_k"},
    "l01.unscaled": {"en": "not scaled", "zh": "未缩放"},
    "l01.scores_title": {"en": "{n} scores, {mode}", "zh": "{n} 个分数，{mode}"},
    "l01.weights_title": {
        "en": "softmax weights of query 0 over {keys} keys",
        "zh": "查询 0 对 {keys} 个键的 softmax 权重",
    },
    "l01.scaling_summary": {
        "en": "d_k = {d_k}, {mode}: std of the scores {std:.2f}; largest weight of query 0 {top:.2f}; "
        "largest weight averaged over {queries} queries {mean_top:.2f}",
        "zh": "d_k = {d_k}，{mode}：分数的标准差 {std:.2f}；查询 0 的最大权重 {top:.2f}；"
        "{queries} 个查询的最大权重平均为 {mean_top:.2f}",
    },
    # lesson 02 (widgets, plots): keys start with "l02."
    "l02.sequence": {"en": "sequence {n}", "zh": "序列 {n}"},
    "l02.causal": {"en": "causal mask", "zh": "因果掩码"},
    "l02.plot.mask_title": {"en": "keep mask, sequence {n}", "zh": "保留掩码，序列 {n}"},
    "l02.plot.weights_title": {"en": "weights, sequence {n}", "zh": "注意力权重，序列 {n}"},
    "l02.plot.keep": {"en": "keep", "zh": "保留"},
    "l02.plot.hidden": {"en": "hidden", "zh": "遮住"},
    "l02.plot.slot": {"en": "slot {n}", "zh": "槽位 {n}"},
    "l02.plot.qkv_slot": {"en": "head {h}, item {b}", "zh": "头 {h}，样本 {b}"},
    "l02.plot.mask_slot": {"en": "mask of item {b}", "zh": "样本 {b} 的掩码"},
    "l02.plot.qkv_header": {"en": "Q, K, V\nhead-major: h·B + b", "zh": "Q、K、V\n头优先：h·B + b"},
    "l02.plot.mask_header_batch": {"en": "mask\nbatch-major: b·H + h", "zh": "掩码\n批量优先：b·H + h"},
    "l02.plot.mask_header_head": {"en": "mask\nhead-major: h·B + b", "zh": "掩码\n头优先：h·B + b"},
    "l02.summary": {"en": "lengths {lengths}, causal mask: {causal}", "zh": "长度 {lengths}，因果掩码：{causal}"},
    "l02.visible": {
        "en": "sequence {n}: keys each query may see {counts}",
        "zh": "序列 {n}：每个查询可见的键数 {counts}",
    },
    "l02.hidden_rows": {
        "en": "fully masked rows: {count} (their weights are all 0)",
        "zh": "全遮蔽行：{count} 行（其权重全为 0）",
    },
    # lesson 03 (widgets, plots): keys start with "l03."
    "l03.example": {"en": "example", "zh": "样例"},
    "l03.correct": {"en": "correct", "zh": "正确"},
    "l03.wrong": {"en": "wrong", "zh": "错误"},
    "l03.self_attention": {"en": "self-attention", "zh": "自注意力"},
    "l03.cross_attention": {"en": "cross-attention", "zh": "交叉注意力"},
    "l03.self_title": {"en": "self-attention, reverse", "zh": "自注意力：反转"},
    "l03.cross_title": {"en": "cross-attention, double", "zh": "交叉注意力：重复"},
    "l03.map_title": {"en": "{title}: {when}", "zh": "{title}（{when}）"},
    "l03.before": {"en": "before training", "zh": "训练前"},
    "l03.after": {"en": "after training", "zh": "训练后"},
    "l03.step": {"en": "training step", "zh": "训练步数"},
    "l03.loss": {"en": "loss", "zh": "损失"},
    "l03.reverse": {"en": "reverse", "zh": "反转"},
    "l03.double": {"en": "double", "zh": "重复"},
    "l03.input_label": {"en": "input (keys)", "zh": "输入（键）"},
    "l03.output_label": {"en": "output (queries)", "zh": "输出（查询）"},
    "l03.example_summary": {
        "en": "example {index}: input {tokens}\n"
        "reverse: predicted {reverse}, expected {reverse_target}: {reverse_ok}\n"
        "double:  predicted {double}, expected {double_target}: {double_ok}",
        "zh": "样例 {index}：输入 {tokens}\n"
        "反转：预测 {reverse}，正确答案 {reverse_target}：{reverse_ok}\n"
        "重复：预测 {double}，正确答案 {double_target}：{double_ok}",
    },
    # claims: facts a cell demonstrates (course_utils.claims)
    "claim.false": {
        "en": "This notebook states a fact that is false on this run: {statement}",
        "zh": "本笔记本陈述的一条事实在这次运行中不成立：{statement}",
    },
    "claim.not_boolean": {
        "en": "claim: argument 'holds' got {got}; needs True or False (a bool, or a one-element bool tensor).",
        "zh": "claim：参数 holds 收到 {got}；需要 True 或 False（bool，或只含一个元素的布尔张量）。",
    },
    # input validation
    "error.argument": {
        "en": "{function}: argument '{argument}' got {got}; needs {needed}.",
        "zh": "{function}：参数 {argument} 收到 {got}；需要 {needed}。",
    },
    "error.language": {
        "en": "setup: argument 'lang' got {got!r}; needs one of {known}.",
        "zh": "setup：参数 lang 收到 {got!r}；应为以下之一：{known}。",
    },
}


def set_language(lang):
    """Make `lang` ("en" or "zh") the language of every later message."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(message("error.language", got=lang, known=", ".join(LANGUAGES)))
    _current = lang


def language():
    """The language messages are written in now."""
    return _current


def message(key, **fields):
    """The catalogue entry `key` in the current language, with `fields` filled in."""
    return MESSAGES[key][_current].format(**fields)


def pick(texts):
    """From a {"en": ..., "zh": ...} dict (e.g. a mistake's hint), the text in the current language."""
    return texts[_current]
