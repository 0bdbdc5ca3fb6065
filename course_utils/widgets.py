"""ipywidgets explorers the lessons use. Each is a function that returns a widget.

Every explorer is built the same way (``explorer``): some controls, and a *view*, a plain
function of the controls' values that returns ``(figure or None, summary text)``. The widget
re-runs the view when a control moves and shows the figure as a PNG image and the summary as
text. Views are ordinary functions, so tests call them directly, without a browser or kernel.
"""

import html
import itertools
import math

import ipywidgets as w
import torch

from . import masks, toy, validation
from .i18n import message
from .viz import broadcast_axes, broadcast_picture, figure_png, heatmap, mask_picture, memory_order, new_figure


def explorer(view, **controls):
    """A VBox of `controls`, the view's figure and its summary, updated whenever a control moves.

    view(**values) -> (matplotlib Figure or None, str). Returns the VBox; its ``.image`` and
    ``.summary`` attributes are the output widgets (tests read them).
    """
    image = w.Image(format="png", layout=w.Layout(max_width="640px"))
    summary = w.HTML()

    def update(_change=None):
        figure, text = view(**{name: control.value for name, control in controls.items()})
        if figure is not None:
            image.value = figure_png(figure)
        image.layout.display = None if figure is not None else "none"
        summary.value = f"<pre style='margin:0'>{html.escape(text)}</pre>"

    for control in controls.values():
        control.observe(update, names="value")
    update()
    box = w.VBox([w.HBox(list(controls.values())), image, summary])
    box.image, box.summary = image, summary
    return box


# ---- lesson 00: permute and broadcast explorers


def permute_view(order=(0, 1, 2), contiguous=False):
    """The permute explorer's view. x = torch.arange(24).view(2, 3, 4) is permuted by `order`
    (and copied with .contiguous() when `contiguous`); returns the picture of how the result
    reads memory, and a summary: shape, stride, contiguity, and whether it shares x's memory."""
    x = torch.arange(24).view(2, 3, 4)
    y = x.permute(*order)
    code = f"x.permute{tuple(order)}"
    if contiguous:
        y = y.contiguous()  # a copy, unless y is contiguous already (then y itself)
        code += ".contiguous()"
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    figure, axes = new_figure(size=(8.0, 2.2))
    memory_order(y, ax=axes[0, 0], title=code)
    text = message(
        "l00.permute.summary",
        code=code,
        shape=tuple(y.shape),
        stride=y.stride(),
        contiguous=y.is_contiguous(),
        shares=shares,
        kind=message("l00.view" if shares else "l00.copy"),
    )
    return figure, text


def permute_explorer():
    """Pick an order of the axes of x = torch.arange(24).view(2, 3, 4), optionally copy the
    result with .contiguous(), and see its shape, stride, contiguity and how it reads memory."""
    orders = list(itertools.permutations(range(3)))
    style = {"description_width": "initial"}
    return explorer(
        permute_view,
        order=w.Dropdown(
            options=[(f"x.permute{order}", order) for order in orders],
            value=(0, 1, 2),
            description=message("l00.permute.order"),
            style=style,
        ),
        contiguous=w.Checkbox(value=False, description=message("l00.permute.contiguous"), style=style),
    )


#: The axes of the attention scores the broadcast explorer pairs a mask with.
SCORES_AXES = ("B", "H", "L_q", "L_k")
#: Mask shapes to try (B = 2, L_k = 5): the right one first, then the usual slips.
MASK_SHAPES = ((2, 1, 1, 5), (2, 5), (2, 1, 5), (5,), (2, 1, 5, 1))
#: Scores shapes (B, H, L_q, L_k): L_q = 3; L_q = L_k (self-attention); L_q = B, where a
#: (B, L_k) mask broadcasts without error but lines its batch axis up with the queries; L_q = 1
#: (one decoding step), where a (B, L_k) mask grows the result to (B, H, B, L_k).
SCORES_SHAPES = ((2, 4, 3, 5), (2, 4, 5, 5), (2, 4, 2, 5), (2, 4, 1, 5))


def broadcast_view(mask=(2, 1, 1, 5), scores=(2, 4, 3, 5)):
    """The broadcast explorer's view: the picture of `mask` and `scores` (B, H, L_q, L_k)
    aligned from the right, and a summary: the result shape or the clash that makes broadcasting
    fail, whether the result grew bigger than the scores, and which scores axes the mask's axes
    line up with."""
    mask, scores = tuple(mask), tuple(scores)
    axes = broadcast_axes(mask, scores)
    figure, ax = new_figure(size=(6.5, 2.3))
    names = (message("l00.broadcast.mask"), message("l00.broadcast.scores"))
    broadcast_picture(mask, scores, ax=ax[0, 0], names=names, axis_names=SCORES_AXES)
    clashes = [(i - len(axes), a, b) for i, (a, b, _, status) in enumerate(axes) if status == "clash"]
    if clashes:
        axis, size_mask, size_scores = clashes[0]
        first = message("l00.broadcast.clash", mask=mask, scores=scores, axis=axis, size_mask=size_mask,
                        size_scores=size_scores)
    else:
        result = tuple(size for _, _, size, _ in axes)
        first = message("l00.broadcast.ok", mask=mask, scores=scores, result=result)
        named = (None,) * (len(axes) - len(SCORES_AXES)) + SCORES_AXES  # a mask with more axes adds unnamed ones
        grown = [named[i] or str(i - len(axes)) for i, (*_, status) in enumerate(axes) if status == "stretch_b"]
        if grown:  # the scores' own size-1 axes were repeated: the result is bigger than the scores
            names = message("l00.broadcast.separator").join(grown)
            first += "\n" + message("l00.broadcast.grows", result=result, scores=scores, names=names)
    lined_up = SCORES_AXES[len(SCORES_AXES) - len(mask):]
    names = message("l00.broadcast.separator").join(lined_up)
    return figure, first + "\n" + message("l00.broadcast.aligned", names=names)


def broadcast_explorer():
    """Pick a mask shape and a scores shape (B, H, L_q, L_k) and see whether and how they broadcast."""
    style = {"description_width": "initial"}
    return explorer(
        broadcast_view,
        mask=w.Dropdown(options=[(str(s), s) for s in MASK_SHAPES], value=MASK_SHAPES[0],
                        description=message("l00.broadcast.mask"), style=style),
        scores=w.Dropdown(options=[(str(s), s) for s in SCORES_SHAPES], value=SCORES_SHAPES[0],
                          description=message("l00.broadcast.scores"), style=style),
    )


# ---- lesson 01: why divide by √d_k

#: The d_k values the scaling explorer offers: the powers of two from 1 to 512.
D_K_CHOICES = tuple(2**power for power in range(10))


def scaling_view(d_k=64, scaled=False, queries=256, keys=16, seed=0):
    """Why attention divides by √d_k, for one d_k: how spread out the scores q · k are, and how
    sharp a query's softmax over `keys` keys becomes, with or without the division.

    Draws `queries` random queries of size d_k and `keys` random keys for each of them, every
    entry standard normal, from a generator seeded with `seed` (so a view never changes), in
    float64 (so the rounded numbers of the summary are the same on every machine).

    Returns ``(figure, summary)``: the figure shows the histogram of all queries x keys scores
    beside the standard normal curve, and query 0's softmax weights; the summary states the
    scores' standard deviation, query 0's largest weight and the largest weight averaged over
    all queries (1/keys would be uniform attention, 1 a one-hot lookup).
    """
    if not isinstance(d_k, int) or isinstance(d_k, bool) or d_k < 1:
        validation.fail("scaling_view", "d_k", validation.describe(d_k), {"en": "a positive int", "zh": "正整数"})
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(queries, 1, d_k, generator=generator, dtype=torch.float64)  # (N, 1, d_k)
    k = torch.randn(queries, keys, d_k, generator=generator, dtype=torch.float64)  # (N, L_k, d_k): own keys
    scores = (q @ k.transpose(-2, -1)).squeeze(-2)  # (N, L_k)
    if scaled:
        scores = scores / math.sqrt(d_k)
    weights = torch.softmax(scores, dim=-1)  # (N, L_k)
    std = scores.std().item()
    largest = weights.amax(dim=-1)  # (N,)
    mode = message("l01.scaled" if scaled else "l01.unscaled")

    figure, ((left, right),) = new_figure(rows=1, cols=2, size=(8.0, 3.2))
    reach = max(4.0, 4.0 * std)  # the x-range follows the scores, so the normal curve shrinks as they spread
    left.hist(scores.flatten().numpy(), bins=40, range=(-reach, reach), density=True, color="tab:blue", alpha=0.7)
    x = torch.linspace(-reach, reach, 400)
    left.plot(x.numpy(), (torch.exp(-x**2 / 2) / math.sqrt(2 * math.pi)).numpy(), "k--", lw=1,
              label=message("l01.standard_normal"))
    left.set_xlabel(message("l01.score"))
    left.set_ylabel(message("l01.density"))
    left.set_title(message("l01.scores_title", n=scores.numel(), mode=mode), fontsize=10)
    left.legend(loc="upper right", fontsize=8)
    right.bar(range(keys), weights[0].numpy(), color="tab:orange")
    right.axhline(1 / keys, color="gray", ls=":", lw=1, label=message("l01.uniform", keys=keys))
    right.set_ylim(0, 1)
    right.set_xticks(range(0, keys, max(1, keys // 8)))
    right.set_xlabel(message("plot.key"))
    right.set_ylabel(message("l01.weight"))
    right.set_title(message("l01.weights_title", keys=keys), fontsize=10)
    right.legend(loc="upper right", fontsize=8)
    summary = message(
        "l01.scaling_summary",
        d_k=d_k,
        mode=mode,
        std=std,
        top=largest[0].item(),
        queries=queries,
        mean_top=largest.mean().item(),
    )
    return figure, summary


def scaling_explorer(d_k=64, scaled=False):
    """A d_k slider (1 to 512, powers of two) and a "divide by √d_k" checkbox over ``scaling_view``."""
    return explorer(
        scaling_view,
        d_k=w.SelectionSlider(options=D_K_CHOICES, value=d_k, description="d_k", continuous_update=False),
        scaled=w.Checkbox(value=scaled, description=message("l01.divide_by_sqrt"), indent=False),
    )


# ---- lesson 02: padding and causal masks


#: The padded length of the mask explorer's batch of two sequences.
MASK_MAX_LEN = 6


def mask_view(length_1=6, length_2=3, causal=False, max_len=MASK_MAX_LEN, seed=0):
    """The mask explorer's view: a batch of two sequences of lengths `length_1` and `length_2`,
    padded to `max_len`, with the look-ahead (causal) mask on or off.

    Builds the keep mask, padding_mask (B, 1, 1, L) & causal_mask (L, L) when `causal`, and the
    attention weights it gives to fixed random queries and keys (a generator seeded with `seed`,
    so the view never changes). Returns ``(figure, summary)``: the figure shows each sequence's
    mask beside its weights; the summary says how many keys each query may see and how many rows
    are fully masked (their weights are all zero).
    """
    for argument, value in (("length_1", length_1), ("length_2", length_2)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= max_len:
            validation.fail("mask_view", argument, validation.describe(value),
                            {"en": f"an int from 0 to {max_len}", "zh": f"0 到 {max_len} 之间的整数"})
    lengths = torch.tensor([length_1, length_2])
    keep = masks.padding_mask(lengths, max_len)  # (B, 1, 1, L)
    if causal:
        keep = keep & masks.causal_mask(max_len)  # (B, 1, L, L)
    keep = keep.expand(2, 1, max_len, max_len)[:, 0]  # (B, L_q, L_k): one picture per sequence
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, max_len, 4, generator=generator, dtype=torch.float64)
    k = torch.randn(2, max_len, 4, generator=generator, dtype=torch.float64)
    weights = masks.masked_softmax(q @ k.transpose(-2, -1) / 2.0, keep)  # (B, L_q, L_k); √d_k = 2

    figure, axes = new_figure(rows=2, cols=2, size=(7.5, 6.0))
    for b in range(2):
        mask_picture(keep[b], ax=axes[b, 0], title=message("l02.plot.mask_title", n=b + 1))
        heatmap(weights[b], ax=axes[b, 1], title=message("l02.plot.weights_title", n=b + 1), vmax=1.0,
                annotate=False)
    lines = [message("l02.summary", lengths=(length_1, length_2), causal=message("l02.on" if causal else "l02.off"))]
    for b in range(2):
        lines.append(message("l02.visible", n=b + 1, counts=keep[b].sum(dim=-1).tolist()))
    lines.append(message("l02.hidden_rows", count=int((~keep.any(dim=-1)).sum())))
    return figure, "\n".join(lines)


def mask_explorer(length_1=6, length_2=3, causal=False):
    """Two length sliders (0 to MASK_MAX_LEN) and a causal checkbox over ``mask_view``."""
    def slider(value, n):
        return w.IntSlider(value=value, min=0, max=MASK_MAX_LEN, description=message("l02.sequence", n=n),
                           continuous_update=False)

    return explorer(
        mask_view,
        length_1=slider(length_1, 1),
        length_2=slider(length_2, 2),
        causal=w.Checkbox(value=causal, description=message("l02.causal"), indent=False),
    )


# ---- lesson 03: the learned self- and cross-attention maps


#: How many held-out example sequences the attention maps explorer offers.
EXAMPLES = 50


def attention_maps_view(reverse_model, double_model, example=0):
    """The attention maps explorer's view for held-out example number `example`
    (``toy.example``): the self-attention map of `reverse_model` and the cross-attention map of
    `double_model` (``toy.ReverseModel`` / ``toy.EncoderDecoder``) on that sequence.

    Returns ``(figure, summary)``: the figure shows both maps, keys labelled with the input tokens
    and queries with the predicted output tokens; the summary states the input, each model's
    prediction, the right answer and whether they agree (tokens and words only, no numbers,
    so it reads the same on every machine).
    """
    if not isinstance(example, int) or isinstance(example, bool) or example < 0:
        validation.fail("attention_maps_view", "example", validation.describe(example),
                        {"en": "an int ≥ 0", "zh": "≥ 0 的整数"})
    tokens, _ = toy.example("reverse", example)  # both tasks read the same input sequence
    figure, axes = new_figure(rows=1, cols=2, size=(8.5, 4.6))
    fields = {}
    for ax, task, model, title in ((axes[0, 0], "reverse", reverse_model, "l03.self_title"),
                                   (axes[0, 1], "double", double_model, "l03.cross_title")):
        target = tokens[toy.target_positions(task, len(tokens))]
        predicted = toy.predict(model, tokens)  # (L_out,)
        heatmap(toy.attention_map(model, tokens), ax=ax, queries=list(toy.letters(predicted)),
                keys=list(toy.letters(tokens)), title=message(title), vmax=1.0, annotate=False, colorbar=False)
        ax.set_xlabel(message("l03.input_label"))
        ax.set_ylabel(message("l03.output_label"))
        fields[task] = toy.letters(predicted)
        fields[f"{task}_target"] = toy.letters(target)
        fields[f"{task}_ok"] = message("l03.correct" if torch.equal(predicted, target) else "l03.wrong")
    summary = message("l03.example_summary", index=example, tokens=toy.letters(tokens), **fields)
    return figure, summary


def attention_maps_explorer(reverse_model, double_model, example=0):
    """An example slider (0 to EXAMPLES - 1) over ``attention_maps_view`` for two trained models."""
    def view(example):
        return attention_maps_view(reverse_model, double_model, example=example)

    return explorer(
        view,
        example=w.IntSlider(value=example, min=0, max=EXAMPLES - 1, description=message("l03.example"),
                            continuous_update=False),
    )


# ---- lesson 04: what each head of a trained model reads


def heads_view(model, example=0, head=0):
    """The heads explorer's view for held-out example number `example` of the neighbours task
    (``toy.neighbours_example``) and head number `head` of `model` (a trained
    ``toy.NeighboursModel``).

    Returns ``(figure, summary)``: the figure shows the head's attention map, keys labelled with
    the input tokens and queries with the token each position holds; the summary states the input,
    which neighbour the head gives more than 0.6 of its weight at every query of this example (if
    one), the model's answers for both neighbours and whether they are right (tokens and words
    only, so it reads the same on every machine).
    """
    heads = model.attention.num_heads
    if not isinstance(example, int) or isinstance(example, bool) or example < 0:
        validation.fail("heads_view", "example", validation.describe(example), {"en": "an int ≥ 0", "zh": "≥ 0 的整数"})
    if not isinstance(head, int) or isinstance(head, bool) or not 0 <= head < heads:
        validation.fail("heads_view", "head", validation.describe(head),
                        {"en": f"an int from 0 to {heads - 1}", "zh": f"0 到 {heads - 1} 之间的整数"})
    tokens, targets = toy.neighbours_example(example)
    maps = toy.head_maps(model, tokens)  # (H, L, L)
    with torch.no_grad():
        predicted = model(tokens.unsqueeze(0))[0][0].argmax(dim=-1)  # (L, 2): left and right answers
    figure, axes = new_figure(size=(4.6, 4.0))
    letters = list(toy.letters(tokens))
    heatmap(maps[head], ax=axes[0, 0], queries=letters, keys=letters, vmax=1.0, annotate=False,
            title=message("l04.plot.head", h=head))
    axes[0, 0].set_xlabel(message("l04.plot.keys"))
    axes[0, 0].set_ylabel(message("l04.plot.queries"))
    side = toy.head_sides(maps[head : head + 1])[0]
    role = message("l04.role", side=message(f"l04.{side}")) if side else message("l04.role_none")
    right = torch.equal(predicted, targets)
    summary = message(
        "l04.heads_summary",
        index=example,
        tokens=toy.letters(tokens),
        role=role,
        left=toy.letters(predicted[:, 0]),
        right=toy.letters(predicted[:, 1]),
        left_target=toy.letters(targets[:, 0]),
        right_target=toy.letters(targets[:, 1]),
        verdict=message("l04.correct" if right else "l04.wrong"),
    )
    return figure, summary


def heads_explorer(model, example=0, head=0):
    """An example slider (0 to EXAMPLES - 1) and a head picker over ``heads_view`` for a trained
    ``toy.NeighboursModel``."""
    def view(example, head):
        return heads_view(model, example=example, head=head)

    heads = model.attention.num_heads
    return explorer(
        view,
        example=w.IntSlider(value=example, min=0, max=EXAMPLES - 1, description=message("l04.example"),
                            continuous_update=False),
        head=w.ToggleButtons(options=[(message("l04.plot.head", h=h), h) for h in range(heads)], value=head,
                             description=message("l04.head")),
    )
