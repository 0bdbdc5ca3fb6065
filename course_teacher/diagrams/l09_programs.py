"""Diagram 09_programs (lesson 09): a Triton kernel's grid of programs, each owning a block of queries,
the key/value blocks streamed from the GPU's main memory (HBM) into one program's fast memory (SRAM)."""

from matplotlib.patches import Rectangle

from .sheet import GREY, INK, MASK, PANEL, QKV, RESULT, SIZE, SMALL, TENSOR, Sheet, label

PROGRAMS = {
    "title": label("One program per query block: keys and values stream through fast memory",
                   "每个查询块一个程序：键和值依次流过片上存储"),
    "grid": label("the grid", "网格"),
    "program": label("program", "程序"),
    "hbm": label("HBM: the GPU's main memory (large, slow)", "HBM：GPU 的主存（大而慢）"),
    "sram": label("SRAM of program 2 (small, fast)", "程序 2 的 SRAM（小而快）"),
    "once": label("loaded once", "只读入一次"),
    "stream": label("one block at a time, j = 0, 1, 2, 3", "一次一块，j = 0, 1, 2, 3"),
    "state": label("never leave it", "从不离开"),
    "in": label("read", "读入"),
    "out": label("written once", "只写一次"),
    "parallel": label("all run at once,", "所有程序同时运行，"),
    "own": label("each on its own block", "各管一块"),
}

BLOCK_STYLE = {"facecolor": "#e8f1fb", "edgecolor": "white"}


def programs(lang):
    """Left: the grid, four programs (query blocks 0 to 3 of one batch·head), program 2 highlighted;
    middle: HBM holding Q, K, V and O as four blocks each; right: program 2's SRAM, holding its query
    block, one key/value block at a time and the running max, sum and accumulator."""
    s = PROGRAMS
    sheet = Sheet(9.6, 4.6, lang)
    sheet.line(4.8, 4.3, [s["title"]], SIZE + 1, INK)
    n, size, top = 4, 0.62, 3.55
    highlighted = 2
    sheet.ax.add_patch(Rectangle((2.2, 0.45), 3.75, 3.65, **PANEL))  # HBM, under the arrows that reach into it
    # the grid of programs
    sheet.line(0.95, top + 0.3, [s["grid"]], SMALL, GREY)
    for i in range(n):
        y = top - (i + 0.5) * size
        edge = MASK if i == highlighted else "#4a7ab5"
        sheet.box(0.95, y, 1.3, size - 0.14, [([s["program"], f"({i}, 0)"], SMALL, INK)],
                  {"facecolor": "white", "edgecolor": edge}, rounded=True)
        sheet.arrow((1.62, y), (2.33, y), color=QKV["Q"] if i == highlighted else "#b0b0b0", dashed=i != highlighted)
    sheet.lines(0.95, top - n * size - 0.4, [([s["parallel"]], SMALL - 1, GREY), ([s["own"]], SMALL - 1, GREY)])
    # HBM: four tensors of four blocks each
    sheet.line(4.07, 0.7, [s["hbm"]], SMALL, GREY)
    columns = (("Q", 2.7, QKV["Q"]), ("K", 3.55, QKV["K"]), ("V", 4.4, QKV["V"]), ("O", 5.25, "#4f8a3f"))
    for name, x, color in columns:
        sheet.line(x, top + 0.3, [f"${name}$"], SIZE, color)
        for i in range(n):
            style = dict(BLOCK_STYLE, facecolor=color, alpha=0.85 if (name in "KV" or i == highlighted) else 0.3)
            sheet.ax.add_patch(Rectangle((x - 0.3, top - (i + 1) * size), 0.6, size, linewidth=2, **style))
            sheet.line(x, top - (i + 0.5) * size, [f"${name}_{i}$"], SMALL, "white")
    # program 2's SRAM
    x, y = 8.0, 2.3
    sheet.box(x, y, 2.9, 2.2, [([s["sram"]], SMALL, GREY),
                                ([r"$Q_2$", s["once"]], SIZE, QKV["Q"]),
                                ([r"$K_j, V_j$"], SIZE, QKV["K"]),
                                ([s["stream"]], SMALL, GREY),
                                ([r"$m,\ \ell,\ acc$", s["state"]], SIZE, INK),
                                ([r"$O_2 = acc / \ell,\ \mathrm{lse}_2$"], SIZE, "#4f8a3f")], TENSOR, rounded=True)
    sheet.arrow((5.95, 3.0), (6.55, 3.0), color=QKV["K"])
    sheet.line(6.25, 3.2, [s["in"]], SMALL - 1, GREY)
    sheet.arrow((6.55, 1.5), (5.6, 1.5), (5.6, top - (highlighted + 1) * size), color=RESULT["edgecolor"])
    sheet.line(6.15, 1.3, [s["out"]], SMALL - 1, GREY)
    return sheet.figure
