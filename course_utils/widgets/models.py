"""Lessons 03 and 04: what the trained toy models attend to, map by map and head by head."""

import functools

import ipywidgets as w
import torch

from .. import toy, validation
from ..i18n import message
from ..viz import heatmap, keep_layout, new_figure
from .explorer import explorer, model_state, reusable

# ---- lesson 03: the learned self- and cross-attention maps


#: How many held-out example sequences the attention maps explorer offers.
EXAMPLES = 50


def attention_maps_view(reverse_model, double_model, example=0, figure=None):
    """The attention maps explorer's view for held-out example number `example`
    (``toy.example``): the self-attention map of `reverse_model` and the cross-attention map of
    `double_model` (``toy.ReverseModel`` / ``toy.EncoderDecoder``) on that sequence.

    Returns ``(figure, summary)``: the figure shows both maps, keys labelled with the input tokens
    and queries with the predicted output tokens; the summary states the input, each model's
    prediction, the right answer and whether they agree (tokens and words only, no numbers,
    so it reads the same on every machine). figure: one this view returned before, updated in
    place (what the explorer passes; faster than a new figure).
    """
    if not isinstance(example, int) or isinstance(example, bool) or example < 0:
        validation.fail("attention_maps_view", "example", validation.describe(example),
                        {"en": "an int ≥ 0", "zh": "≥ 0 的整数"})
    _toy_models("attention_maps_view", reverse_model, double_model)
    tokens, _ = toy.example("reverse", example)  # both tasks read the same input sequence
    fields, drawn = {}, []
    for task, model in (("reverse", reverse_model), ("double", double_model)):
        target = tokens[toy.target_positions(task, len(tokens))]
        predicted = toy.predict(model, tokens)  # (L_out,)
        drawn.append((toy.attention_map(model, tokens), list(toy.letters(predicted))))
        fields[task] = toy.letters(predicted)
        fields[f"{task}_target"] = toy.letters(target)
        fields[f"{task}_ok"] = message("l03.correct" if torch.equal(predicted, target) else "l03.wrong")
    key = ("attention_maps", *(tuple(weights.shape) for weights, _ in drawn))
    figure = reusable(figure, key)
    if figure is None:  # laid out once: the labels are single letters, whatever the example
        figure, axes = new_figure(rows=1, cols=2, size=(8.5, 4.6))
        for ax, (weights, _), title in zip(axes[0], drawn, ("l03.self_title", "l03.cross_title")):
            heatmap(torch.zeros_like(weights), ax=ax, queries=["x"] * weights.shape[0], keys=["x"] * weights.shape[1],
                    title=message(title), vmax=1.0, annotate=False, colorbar=False)
            ax.set_xlabel(message("l03.input_label"))
            ax.set_ylabel(message("l03.output_label"))
        keep_layout(figure)
        figure.explorer_key = key
    for ax, (weights, queries) in zip(figure.axes, drawn):
        ax.images[0].set_data(weights.numpy())
        ax.set_xticks(range(len(tokens)), list(toy.letters(tokens)))
        ax.set_yticks(range(len(queries)), queries)
    summary = message("l03.example_summary", index=example, tokens=toy.letters(tokens), **fields)
    return figure, summary


def _toy_models(function, reverse_model, double_model):
    """The two trained models of lesson 03, each named as the argument it was given as."""
    for argument, model in (("reverse_model", reverse_model), ("double_model", double_model)):
        if not isinstance(model, (toy.ReverseModel, toy.EncoderDecoder)):
            validation.fail(function, argument, validation.describe(model),
                            {"en": "a trained toy model (toy.ReverseModel / toy.EncoderDecoder), e.g. "
                                   f"toy.train({argument.split('_')[0]!r}).model",
                             "zh": "训练好的玩具模型（toy.ReverseModel / toy.EncoderDecoder），例如 "
                                   f"toy.train({argument.split('_')[0]!r}).model"})


def attention_maps_explorer(reverse_model, double_model, example=0):
    """An example slider (0 to EXAMPLES - 1) over ``attention_maps_view`` for two trained models."""
    _toy_models("attention_maps_explorer", reverse_model, double_model)
    validation.whole_number("attention_maps_explorer", "example", example, 0, EXAMPLES - 1)

    def view(example, figure=None):
        return attention_maps_view(reverse_model, double_model, example=example, figure=figure)

    return explorer(
        view,
        example=w.IntSlider(value=example, min=0, max=EXAMPLES - 1, description=message("l03.example"),
                            continuous_update=False),
    )


# ---- lesson 04: what each head of a trained model reads


@functools.lru_cache(maxsize=64)
def _heads_run(model, state, example):
    """`model`'s head maps (H, L, L) and answers (L, 2) on neighbours example `example`, with the
    example's tokens and targets: computed once per example (and per state of the model's
    parameters), so picking another head recomputes nothing."""
    tokens, targets = toy.neighbours_example(example)
    with torch.no_grad():
        logits, maps = model(tokens.unsqueeze(0))
    return tokens, targets, maps[0], logits[0].argmax(dim=-1)  # (L,), (L, 2), (H, L, L), (L, 2)


def heads_view(model, example=0, head=0, figure=None):
    """The heads explorer's view for held-out example number `example` of the neighbours task
    (``toy.neighbours_example``) and head number `head` of `model` (a trained
    ``toy.NeighboursModel``).

    Returns ``(figure, summary)``: the figure shows the head's attention map, keys labelled with
    the input tokens and queries with the token each position holds; the summary states the input,
    which neighbour the head gives more than 0.6 of its weight at every query of this example (if
    one), the model's answers for both neighbours and whether they are right (tokens and words
    only, so it reads the same on every machine). figure: one this view returned before, updated
    in place (what the explorer passes; faster than a new figure).
    """
    if not isinstance(model, toy.NeighboursModel):
        validation.fail("heads_view", "model", validation.describe(model),
                        {"en": "a toy.NeighboursModel (e.g. toy.train_neighbours(seed=0).model)",
                         "zh": "toy.NeighboursModel（例如 toy.train_neighbours(seed=0).model）"})
    heads = model.attention.num_heads
    if not isinstance(example, int) or isinstance(example, bool) or example < 0:
        validation.fail("heads_view", "example", validation.describe(example), {"en": "an int ≥ 0", "zh": "≥ 0 的整数"})
    if not isinstance(head, int) or isinstance(head, bool) or not 0 <= head < heads:
        validation.fail("heads_view", "head", validation.describe(head),
                        {"en": f"an int from 0 to {heads - 1}", "zh": f"0 到 {heads - 1} 之间的整数"})
    tokens, targets, maps, predicted = _heads_run(model, model_state(model), example)
    letters = list(toy.letters(tokens))
    key = ("heads", len(letters))
    figure = reusable(figure, key)
    if figure is None:  # laid out once: the labels are single letters, whatever the example and head
        figure, axes = new_figure(size=(4.6, 4.0))
        heatmap(torch.zeros_like(maps[head]), ax=axes[0, 0], queries=letters, keys=letters, vmax=1.0, annotate=False,
                title=message("l04.plot.head", h=head))
        axes[0, 0].set_xlabel(message("l04.plot.keys"))
        axes[0, 0].set_ylabel(message("l04.plot.queries"))
        keep_layout(figure)
        figure.explorer_key = key
    ax = figure.axes[0]
    ax.images[0].set_data(maps[head].numpy())
    ax.set_xticks(range(len(letters)), letters)
    ax.set_yticks(range(len(letters)), letters)
    ax.set_title(message("l04.plot.head", h=head))
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
    if not isinstance(model, toy.NeighboursModel):
        validation.fail("heads_explorer", "model", validation.describe(model),
                        {"en": "a toy.NeighboursModel (e.g. toy.train_neighbours(seed=0).model)",
                         "zh": "toy.NeighboursModel（例如 toy.train_neighbours(seed=0).model）"})
    validation.whole_number("heads_explorer", "example", example, 0, EXAMPLES - 1)
    validation.whole_number("heads_explorer", "head", head, 0, model.attention.num_heads - 1)

    def view(example, head, figure=None):
        return heads_view(model, example=example, head=head, figure=figure)

    heads = model.attention.num_heads
    return explorer(
        view,
        example=w.IntSlider(value=example, min=0, max=EXAMPLES - 1, description=message("l04.example"),
                            continuous_update=False),
        head=w.ToggleButtons(options=[(message("l04.plot.head", h=h), h) for h in range(heads)], value=head,
                             description=message("l04.head")),
    )
