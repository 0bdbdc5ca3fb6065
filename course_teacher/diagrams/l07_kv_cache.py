"""Diagram 07_kv_cache (lesson 07): one decode step with a KV cache and grouped-query attention."""

from matplotlib.patches import Rectangle

from .sheet import GREY, INK, OPERATION, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

KV_CACHE = {
    "new": label("new token at position T", "位置 T 上的新词元"),
    "project": label("project: W_Q, W_K, W_V", "投影：W_Q、W_K、W_V"),
    "rope": label("RoPE at position T", "按位置 T 做 RoPE"),
    "q_heads": label("H = 4 query heads", "H = 4 个查询头"),
    "kv_heads": label("H_kv = 2 key/value heads", "H_kv = 2 个键/值头"),
    "k_cache": label("K cache", "K 缓存"),
    "v_cache": label("V cache", "V 缓存"),
    "cached_positions": label("positions 0 … T − 1:", "位置 0 … T − 1："),
    "cached": label("computed once, never again", "只算一次，不再重算"),
    "append": label("append", "追加"),
    "groups": label("query heads 0, 1 read K/V head 0; 2, 3 read head 1", "查询头 0、1 读键/值头 0；2、3 读键/值头 1"),
    "interleave": label("no copies: each K/V head read as it is", "不复制：每个键/值头原样读取"),
    "attend": label("attention: 1 query × (T + 1) keys per head", "注意力：每个头 1 个查询 × (T + 1) 个键"),
    "cost": label("cost O(T) per token, not O(T²)", "每个词元的代价 O(T)，而不是 O(T²)"),
    "output": label("output → next token", "输出 → 下一个词元"),
}

T = 6  # cached positions drawn


def kv_cache(lang):
    """The new token is projected to q (4 heads) and k, v (2 heads), rotated at position T, its k and
    v appended to the caches (B, H_kv, T + 1, d), and its queries attend over them, query heads
    grouped onto key/value heads."""
    s = KV_CACHE
    sheet = Sheet(11.0, 5.0, lang)
    ax = sheet.ax
    # left column: the new token's path
    x0 = 1.55
    sheet.box(x0, 4.5, 2.7, 0.5, [([s["new"]], SIZE, INK), (["$x_T$: $(B, 1, E)$"], SMALL, GREY)], TENSOR, rounded=True)
    sheet.arrow((x0, 4.25), (x0, 3.82))
    sheet.box(x0, 3.55, 2.7, 0.5, [([s["project"]], SIZE, INK)], OPERATION)
    sheet.arrow((x0, 3.3), (x0, 2.9))
    sheet.lines(x0, 2.62, [([s["q_heads"], "$(B, 4, 1, d)$"], SMALL, QKV["Q"]),
                           ([s["kv_heads"], "$(B, 2, 1, d)$"], SMALL, QKV["K"])])
    sheet.arrow((x0, 2.3), (x0, 1.92))
    sheet.box(x0, 1.65, 2.7, 0.5, [([s["rope"], "(q, k)"], SIZE, INK)], OPERATION)
    # the caches: two K/V heads, T cached cells and one new one
    cell, left = 0.36, 3.9
    rows = {}
    for name, colour, top in (("k_cache", QKV["K"], 4.7), ("v_cache", QKV["V"], 3.35)):
        sheet.line(left, top, [s[name], "$(B, H_{kv}, T + 1, d)$"], SMALL, colour, ha="left")
        for head in range(2):
            y = top - 0.42 - head * (cell + 0.06)
            rows[name, head] = y
            sheet.line(left - 0.12, y, [f"$h_{{kv}} = {head}$"], SMALL, GREY, ha="right")
            for t in range(T + 1):
                new = t == T
                ax.add_patch(Rectangle((left + t * cell, y - (cell - 0.04) / 2), cell - 0.04, cell - 0.04,
                                       facecolor=RESULT["facecolor"] if new else TENSOR["facecolor"],
                                       edgecolor=RESULT["edgecolor"] if new else TENSOR["edgecolor"], linewidth=1.1))
                sheet.line(left + t * cell + (cell - 0.04) / 2, y, ["T" if new else str(t)], SMALL, INK)
    right = left + (T + 1) * cell
    sheet.lines(left, 1.98, [([s["cached_positions"]], SMALL, GREY), ([s["cached"]], SMALL, GREY)], ha="left")
    # the new k appended after RoPE, the new v straight from the projection (values are not rotated)
    up_v, up = right + 0.2, right + 0.45
    v_row = (rows["v_cache", 0] + rows["v_cache", 1]) / 2
    k_row = (rows["k_cache", 0] + rows["k_cache", 1]) / 2
    under_v = rows["v_cache", 1] - cell / 2 - 0.05  # between the V cache and the note under it
    sheet.arrow((x0 + 1.4, 2.5), (x0 + 1.75, 2.5), (x0 + 1.75, under_v), (up_v, under_v), (up_v, v_row),
                (right + 0.02, v_row), color=QKV["V"])
    sheet.arrow((x0 + 1.35, 1.65), (up, 1.65), (up, k_row), (right + 0.02, k_row), color=QKV["K"])
    sheet.line(up - 0.1, 1.45, [s["append"]], SMALL, GREY, ha="right")
    # the attention, grouped
    ax_x, ax_w, ax_h, ax_y = 9.05, 3.7, 1.06, 1.6
    sheet.box(ax_x, ax_y, ax_w, ax_h, [([s["attend"]], SMALL, INK), ([s["groups"]], SMALL, GREY),
                                       ([s["interleave"]], SMALL, GREY), ([s["cost"]], SMALL, INK)], OPERATION)
    sheet.arrow((x0, 1.4), (x0, 0.85), (ax_x - ax_w / 2 - 0.3, 0.85), (ax_x - ax_w / 2 - 0.3, 1.3),
                (ax_x - ax_w / 2, 1.3), color=QKV["Q"])
    sheet.arrow((up, (v_row + k_row) / 2), (ax_x, (v_row + k_row) / 2), (ax_x, ax_y + ax_h / 2))
    sheet.box(ax_x, 0.4, 2.6, 0.42, [([s["output"]], SIZE, INK)], RESULT, rounded=True)
    sheet.arrow((ax_x, ax_y - ax_h / 2), (ax_x, 0.61))
    return sheet.figure
