"""Lesson 06's exercises: the sinusoidal positional encoding, a pre-norm encoder layer's forward
pass from its given sub-layers, and the two keep masks of a decoder.

The references are written here in plain code (tests/test_exercises_l06.py proves they agree with
``course_utils.transformer``, ``course_utils.masks`` and PyTorch's layers); the package's
``sinusoidal_encoding`` and ``offset_rotation`` and the ``forward`` of the course's and PyTorch's
encoder and decoder layers are forbidden, so a learner cannot pass by calling them.

Every argument varies on its own across the cases, so a function that ignores one, or uses one
size where another is meant, fails somewhere:

- 06.sinusoidal_encoding: length 1, d_model 2 (one pair, where every base gives the same
  table), odd d_model (the last feature a sine without its cosine), length > d_model and
  d_model > length;
- 06.pre_norm_layer: batch 1, length 1, one head and eight heads, E and d_ff unrelated, no mask
  (None), items padded to different lengths (none all padding), float64; the inputs are far from
  normalised (a common offset, a spread of 2) and the two LayerNorms have different weights, so
  that using the wrong norm, or none, shows;
- 06.decoder_masks: batch 1, a target of length 1, a length equal to the padded length, padded
  lengths longer than every length, L_s > L_t and L_s < L_t.

The first case of each exercise is one where every known mistake runs, so a mistake is recognised
by its output.

The encoder layer's sub-layers cannot be passed to the learner's function as modules (a case is
plain data: the grader sends it to the notebook's kernel as tensors, numbers and lists), so the
function takes the layer's weight tensors, as ``nn.TransformerEncoderLayer(..., bias=False)``
stores them, and the exercise cell gives the four sub-layers built from them (``_sublayers`` here
is the same code). The learner writes the wiring. Every weight is an argument of its own, so the
check compares the gradients with respect to each of them as well as to x.
"""

import math

import torch
import torch.nn.functional as F

from .registry import Exercise, Mistake, randn, register

BASE = 10000.0

# ----------------------------------------------------------------------------- 06.sinusoidal_encoding
# (length, d_model) -> (length, d_model) float32: PE[p, 2i] = sin(p / 10000^(2i/E)),
# PE[p, 2i+1] = cos(the same angle), positions from 0; an odd E ends with a sine.


def _sinusoidal_cases(generator):
    del generator  # the sizes are chosen by hand: each case tests an edge
    # (length, d_model). First 6 positions and 8 features, even and unequal, so every mistake runs
    # and shows; then length 1 (position 0 only), d_model 2 (one pair, ω = 1 whatever the base),
    # odd d_model (5 and 3: the last feature a sine), more features than positions, and 40
    # positions (the table's full range of frequencies, p up to 39).
    return [(6, 8), (1, 4), (10, 2), (7, 5), (3, 12), (20, 3), (40, 16)]


def _hidden_sinusoidal_cases(generator):
    """The grader's hidden cases: sizes drawn from its generator, and one table longer than the
    5000 positions a precomputed table usually holds."""
    lengths, widths = _sizes(generator, 5, 1, 64), _sizes(generator, 5, 1, 33)
    return list(zip(lengths, widths)) + [(_sizes(generator, 1, 5001, 6000)[0], 4)]


def _sizes(generator, count, low, high):
    """`count` integers drawn uniformly from [low, high] by the grader's generator."""
    return [int(n) for n in torch.randint(low, high + 1, (count,), generator=generator)]


def _angles(length, d_model, *, base=BASE, pair_factor=2.0, start=0):
    """(L, pairs) float64: p / base^(pair_factor·i / E) for every position p and pair i."""
    pairs = (d_model + 1) // 2
    omega = base ** (-pair_factor * torch.arange(pairs, dtype=torch.float64) / d_model)  # (pairs,)
    return torch.arange(start, start + length, dtype=torch.float64)[:, None] * omega  # (L, pairs)


def _interleave(even, odd, d_model):
    """(L, E): even[:, i] at feature 2i, odd[:, i] at feature 2i + 1 (an odd E drops the last odd one)."""
    length, pairs = even.shape
    return torch.stack((even, odd), dim=-1).reshape(length, 2 * pairs)[:, :d_model]


def _sinusoidal_reference(length, d_model):
    angles = _angles(length, d_model)  # (L, pairs), in float64: rounded once, at the end
    return _interleave(angles.sin(), angles.cos(), d_model).to(torch.float32)  # (L, E)


def _sin_cos_swapped(length, d_model):
    angles = _angles(length, d_model)
    return _interleave(angles.cos(), angles.sin(), d_model).to(torch.float32)


def _halves(length, d_model):
    angles = _angles(length, d_model)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)[:, :d_model].to(torch.float32)  # [sin…, cos…]


def _with_angles(angles, d_model):
    return _interleave(angles.sin(), angles.cos(), d_model).to(torch.float32)


def _base_1000(length, d_model):
    return _with_angles(_angles(length, d_model, base=1000.0), d_model)


def _pair_index_without_two(length, d_model):
    return _with_angles(_angles(length, d_model, pair_factor=1.0), d_model)  # base^(i/E), i the pair


def _feature_index_exponent(length, d_model):
    feature = torch.arange(d_model, dtype=torch.float64)  # j = 0 … E − 1
    angles = torch.arange(length, dtype=torch.float64)[:, None] / BASE ** (feature / d_model)  # (L, E)
    even = (torch.arange(d_model) % 2 == 0)
    return torch.where(even, angles.sin(), angles.cos()).to(torch.float32)  # feature j: base^(j/E)


def _positions_from_one(length, d_model):
    return _with_angles(_angles(length, d_model, start=1), d_model)


def _float64(length, d_model):
    angles = _angles(length, d_model)
    return _interleave(angles.sin(), angles.cos(), d_model)  # left in float64


def _angle_inverted(length, d_model):
    pairs = (d_model + 1) // 2
    growing = BASE ** (2.0 * torch.arange(pairs, dtype=torch.float64) / d_model)  # base^(2i/E), not its inverse
    return _with_angles(torch.arange(length, dtype=torch.float64)[:, None] * growing, d_model)


def _odd_d_model_crashes(length, d_model):
    """The common slice-assignment code: right for an even E, a RuntimeError for an odd one."""
    angles = _angles(length, d_model)  # (L, (E + 1) // 2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = angles.sin()
    pe[:, 1::2] = angles.cos()  # (E + 1) // 2 columns into E // 2 slots: raises when E is odd
    return pe.to(torch.float32)


register(
    Exercise(
        id="06.sinusoidal_encoding",
        reference=_sinusoidal_reference,
        cases=_sinusoidal_cases,
        hidden=_hidden_sinusoidal_cases,
        forbidden=("course_utils.transformer.sinusoidal_encoding", "course_utils.transformer.offset_rotation"),
        mistakes=(
            Mistake(
                "SIN_COS_SWAPPED",
                _sin_cos_swapped,
                {
                    "en": "The cosines are on the even features and the sines on the odd ones. Both put a pair's "
                    "sine and cosine side by side and carry the same information, but this exercise's "
                    "convention (the paper's) is the sine first: PE[p, 2i] = sin, PE[p, 2i + 1] = cos. "
                    "Row 0 shows it: [0, 1, 0, 1, …].",
                    "zh": "余弦放在了偶数号特征上，正弦放在了奇数号特征上。两种排法都让同一对的正弦和余弦相邻，包含的信息"
                    "也相同，但本练习的约定（也是论文的约定）是正弦在前：PE[p, 2i] = sin，PE[p, 2i + 1] = cos。"
                    "第 0 行就能看出来：[0, 1, 0, 1, …]。",
                },
            ),
            Mistake(
                "HALVES",
                _halves,
                {
                    "en": "All the sines come first and then all the cosines, [sin_0, sin_1, …, cos_0, cos_1, …]. "
                    "Some code (tensor2tensor's timing signal, for one) uses that layout: the same numbers with "
                    "the features permuted. This exercise asks for the interleaved layout of the paper: sin_i at "
                    "feature 2i, cos_i at feature 2i + 1.",
                    "zh": "先放了全部正弦，再放全部余弦：[sin_0, sin_1, …, cos_0, cos_1, …]。有些代码（例如 "
                    "tensor2tensor 的 timing signal）就用这种排法：数值相同，只是特征的顺序换了。本练习要的是论文中的"
                    "交错排法：sin_i 放在特征 2i，cos_i 放在特征 2i + 1。",
                },
            ),
            Mistake(
                "BASE_1000",
                _base_1000,
                {
                    "en": "The frequencies use the base 1000. The base is a choice (it sets the longest wavelength, "
                    "about 2π·base positions), and this exercise, like the paper, uses 10000: "
                    "PE[p, 2i] = sin(p / 10000^(2i / d_model)).",
                    "zh": "频率用的底数是 1000。底数是可以选的（它决定最长的波长，约为 2π·底数 个位置），本练习与论文一样"
                    "用 10000：PE[p, 2i] = sin(p / 10000^(2i / d_model))。",
                },
            ),
            Mistake(
                "PAIR_INDEX_WITHOUT_TWO",
                _pair_index_without_two,
                {
                    "en": "Pair i turns at p / 10000^(i / d_model): the exponent lost its factor 2. The exponent "
                    "is 2i / d_model, i the pair's index (features 2i and 2i + 1), so it runs from 0 to almost 1 "
                    "and the slowest pair's wavelength reaches about 2π·10000. torch.arange(0, d_model, 2) "
                    "gives 2i directly.",
                    "zh": "第 i 对按 p / 10000^(i / d_model) 转动：指数丢了因子 2。指数应为 2i / d_model，其中 i 是"
                    "这一对的索引（特征 2i 和 2i + 1），这样它从 0 变到接近 1，最慢一对的波长可达约 2π·10000。"
                    "torch.arange(0, d_model, 2) 直接给出 2i。",
                },
            ),
            Mistake(
                "FEATURE_INDEX_EXPONENT",
                _feature_index_exponent,
                {
                    "en": "Each feature j got its own frequency, p / 10000^(j / d_model), so the sine and the cosine "
                    "of a pair turn at different speeds. Both features of pair i share one angle, "
                    "p / 10000^(2i / d_model): sin on feature 2i, cos on feature 2i + 1. That shared angle is "
                    "what makes a shift of k positions a rotation of each pair.",
                    "zh": "每个特征 j 都用了自己的频率 p / 10000^(j / d_model)，于是同一对的正弦和余弦以不同的速度转动。"
                    "第 i 对的两个特征应共用同一个角度 p / 10000^(2i / d_model)：特征 2i 取 sin，特征 2i + 1 取 cos。"
                    "正是这个共用的角度，使得平移 k 个位置等于把每一对旋转一下。",
                },
            ),
            Mistake(
                "POSITIONS_FROM_ONE",
                _positions_from_one,
                {
                    "en": "The positions start at 1. The first position is 0, so row 0 is [sin 0, cos 0, …] = "
                    "[0, 1, 0, 1, …]: torch.arange(length).",
                    "zh": "位置是从 1 开始的。第一个位置是 0，所以第 0 行是 [sin 0, cos 0, …] = [0, 1, 0, 1, …]："
                    "用 torch.arange(length)。",
                },
            ),
            Mistake(
                "FLOAT64",
                _float64,
                {
                    "en": "The numbers are right but the table's dtype is float64. Computing the angles in float64 is "
                    "a good idea (p · ω keeps more digits); return the table as float32, the dtype of the "
                    "embeddings it is added to: .float() at the end.",
                    "zh": "数值是对的，但表的 dtype 是 float64。用 float64 计算角度是好办法（p · ω 能保留更多位数）；"
                    "但返回的表应为 float32，与要加上它的嵌入的 dtype 相同：在最后加上 .float()。",
                },
            ),
            Mistake(
                "ANGLE_INVERTED",
                _angle_inverted,
                {
                    "en": "The angle is p · 10000^(2i / d_model): the frequencies grow with i, up to thousands of "
                    "radians per position. They shrink: the angle is p / 10000^(2i / d_model), 1 radian per "
                    "position for pair 0 and ever slower after it (a minus sign in the exponent: "
                    "10000^(−2i / d_model)).",
                    "zh": "角度成了 p · 10000^(2i / d_model)：频率随 i 增大，每个位置转动的角度高达几千弧度。频率应当"
                    "递减：角度是 p / 10000^(2i / d_model)，第 0 对每个位置转 1 弧度，之后各对越来越慢（指数带负号："
                    "10000^(−2i / d_model)）。",
                },
            ),
            Mistake(
                "ODD_D_MODEL_CRASHES",
                _odd_d_model_crashes,
                {
                    "en": "Right for an even d_model; for an odd one the assignment to pe[:, 1::2] fails: there are "
                    "(d_model + 1) // 2 frequencies but only d_model // 2 odd features. The last feature of an odd "
                    "d_model is a sine with no cosine: give the cosines the first d_model // 2 columns of the "
                    "angles only.",
                    "zh": "d_model 为偶数时是对的；为奇数时对 pe[:, 1::2] 的赋值会出错：频率有 (d_model + 1) // 2 个，"
                    "奇数号特征却只有 d_model // 2 个。奇数 d_model 的最后一个特征是没有余弦配对的正弦：给余弦只用"
                    "角度的前 d_model // 2 列。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 06.pre_norm_layer
# x (B, L, E), key_padding_mask (B, L) bool True at padding or None, the weights of a bias-free
# nn.TransformerEncoderLayer, num_heads -> (B, L, E):
#     x = x + self_attention(norm1(x), key_padding_mask)
#     x = x + feed_forward(norm2(x))


def _sublayers(norm1_weight, in_proj_weight, out_proj_weight, norm2_weight, linear1_weight, linear2_weight,
               num_heads):
    """(norm1, norm2, self_attention, feed_forward): the four sub-layers the exercise cell gives,
    the same code; each (B, L, E) -> (B, L, E)."""
    E = in_proj_weight.shape[-1]

    def norm1(h):
        return F.layer_norm(h, (E,), norm1_weight)

    def norm2(h):
        return F.layer_norm(h, (E,), norm2_weight)

    def self_attention(h, key_padding_mask=None):
        B, L, _ = h.shape
        q, k, v = F.linear(h, in_proj_weight).chunk(3, dim=-1)  # (B, L, E) each
        q, k, v = (t.view(B, L, num_heads, E // num_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, L, d)
        keep = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]  # (B, 1, 1, L)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # (B, H, L, d)
        return F.linear(out.transpose(1, 2).reshape(B, L, E), out_proj_weight)

    def feed_forward(h):
        return F.linear(F.relu(F.linear(h, linear1_weight)), linear2_weight)

    return norm1, norm2, self_attention, feed_forward


def _layer_case(g, batch, length, embed, heads, d_ff, lengths, dtype=torch.float32):
    x = 2.0 * randn(g, batch, length, embed) + 1.0  # far from normalised: the norms matter
    mask = None if lengths is None else torch.arange(length) >= torch.tensor(lengths)[:, None]  # True at padding
    weights = (
        1.0 + 0.3 * randn(g, embed),  # norm1_weight
        randn(g, 3 * embed, embed) / math.sqrt(embed),  # in_proj_weight
        randn(g, embed, embed) / math.sqrt(embed),  # out_proj_weight
        1.0 + 0.3 * randn(g, embed),  # norm2_weight: another one
        randn(g, d_ff, embed) / math.sqrt(embed),  # linear1_weight
        randn(g, embed, d_ff) / math.sqrt(d_ff),  # linear2_weight
    )
    return (x.to(dtype), mask, *(w.to(dtype) for w in weights), heads)


def _layer_cases(generator):
    # (B, L, E, H, d_ff, lengths). First B = H = 2, every item padded (so even the inverted mask
    # leaves each query a key); then three items of different lengths, one of them full; batch 1
    # and one head; length 1; no mask at all (None) with eight heads; d_ff unrelated to E; float64.
    g = generator
    return [
        _layer_case(g, 2, 5, 8, 2, 16, [4, 2]),
        _layer_case(g, 3, 7, 12, 3, 20, [7, 2, 5]),
        _layer_case(g, 1, 6, 6, 1, 10, [4]),
        _layer_case(g, 2, 1, 8, 4, 8, [1, 1]),
        _layer_case(g, 2, 4, 16, 8, 24, None),
        _layer_case(g, 4, 9, 4, 2, 32, [9, 1, 6, 3]),
        _layer_case(g, 2, 6, 8, 2, 12, [6, 3], dtype=torch.float64),
    ]


def _layer_reference(x, key_padding_mask, norm1_weight, in_proj_weight, out_proj_weight, norm2_weight, linear1_weight,
                     linear2_weight, num_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(
        norm1_weight, in_proj_weight, out_proj_weight, norm2_weight, linear1_weight, linear2_weight, num_heads)
    x = x + self_attention(norm1(x), key_padding_mask)  # the residual path is never normalised
    return x + feed_forward(norm2(x))


def _post_norm(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = norm1(x + self_attention(x, key_padding_mask))
    return norm2(x + feed_forward(x))


def _residual_from_normalised(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    h = norm1(x)
    x = h + self_attention(h, key_padding_mask)
    h = norm2(x)
    return h + feed_forward(h)


def _no_attention_residual(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = self_attention(norm1(x), key_padding_mask)
    return x + feed_forward(norm2(x))


def _no_feed_forward_residual(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = x + self_attention(norm1(x), key_padding_mask)
    return feed_forward(norm2(x))


def _one_norm(x, key_padding_mask, *weights_and_heads):
    norm1, _, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = x + self_attention(norm1(x), key_padding_mask)
    return x + feed_forward(norm1(x))


def _norms_swapped(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = x + self_attention(norm2(x), key_padding_mask)
    return x + feed_forward(norm1(x))


def _mask_not_passed(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = x + self_attention(norm1(x))
    return x + feed_forward(norm2(x))


def _mask_inverted(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = x + self_attention(norm1(x), ~key_padding_mask)  # (raises TypeError where the mask is None)
    return x + feed_forward(norm2(x))


def _feed_forward_unnormalised(x, key_padding_mask, *weights_and_heads):
    norm1, _, self_attention, feed_forward = _sublayers(*weights_and_heads)
    x = x + self_attention(norm1(x), key_padding_mask)
    return x + feed_forward(x)


def _parallel(x, key_padding_mask, *weights_and_heads):
    norm1, norm2, self_attention, feed_forward = _sublayers(*weights_and_heads)
    return x + self_attention(norm1(x), key_padding_mask) + feed_forward(norm2(x))


register(
    Exercise(
        id="06.pre_norm_layer",
        reference=_layer_reference,
        cases=_layer_cases,
        forbidden=(
            "course_utils.transformer.EncoderLayer.forward",
            "course_utils.transformer.DecoderLayer.forward",
            "torch.nn.TransformerEncoderLayer.forward",
            "torch.nn.TransformerDecoderLayer.forward",
        ),
        mistakes=(
            Mistake(
                "POST_NORM",
                _post_norm,
                {
                    "en": "This is the post-norm layer of the original paper (norm_first=False): each norm comes "
                    "after its residual addition, x = norm1(x + self_attention(x)). It is a correct layer, but "
                    "not the one asked for. In a pre-norm layer each sub-layer reads a normalised copy of x, and "
                    "its output is added to x itself: x = x + self_attention(norm1(x), key_padding_mask), then "
                    "the same with norm2 and feed_forward.",
                    "zh": "这是原论文中的后归一化层（norm_first=False）：每个归一化都放在残差相加之后，"
                    "x = norm1(x + self_attention(x))。这本身是正确的一种层，但不是本题要的。在前归一化层里，每个子层读取"
                    " x 归一化后的副本，它的输出再加回 x 本身：x = x + self_attention(norm1(x), key_padding_mask)，"
                    "然后用 norm2 和 feed_forward 同样做一遍。",
                },
            ),
            Mistake(
                "RESIDUAL_FROM_NORMALISED",
                _residual_from_normalised,
                {
                    "en": "The residual adds the sub-layer's output to the normalised input, h + self_attention(h) "
                    "with h = norm1(x), so the norm ends up on the residual path. Add it to x itself: "
                    "x = x + self_attention(norm1(x), key_padding_mask). The path from the input to the output "
                    "then goes through no norm at all, which is why pre-norm stacks train easily.",
                    "zh": "残差把子层的输出加到了归一化之后的输入上：h + self_attention(h)，其中 h = norm1(x)，于是归一化"
                    "落在了残差路径上。应加到 x 本身：x = x + self_attention(norm1(x), key_padding_mask)。这样从输入到"
                    "输出的那条路径上没有任何归一化，这正是前归一化的层堆叠起来容易训练的原因。",
                },
            ),
            Mistake(
                "NO_ATTENTION_RESIDUAL",
                _no_attention_residual,
                {
                    "en": "The attention sub-layer has no residual connection: x = self_attention(norm1(x)) replaces "
                    "x instead of adding to it. Keep the input: x = x + self_attention(norm1(x), "
                    "key_padding_mask).",
                    "zh": "注意力子层缺少残差连接：x = self_attention(norm1(x)) 替换掉了 x，而不是加到 x 上。应保留输入："
                    "x = x + self_attention(norm1(x), key_padding_mask)。",
                },
            ),
            Mistake(
                "NO_FEED_FORWARD_RESIDUAL",
                _no_feed_forward_residual,
                {
                    "en": "The feed-forward sub-layer has no residual connection: the layer returns "
                    "feed_forward(norm2(x)) alone. Add it to its input: x + feed_forward(norm2(x)).",
                    "zh": "前馈子层缺少残差连接：这一层只返回了 feed_forward(norm2(x))。应把它加到输入上："
                    "x + feed_forward(norm2(x))。",
                },
            ),
            Mistake(
                "ONE_NORM",
                _one_norm,
                {
                    "en": "norm1 serves both sub-layers. Each sub-layer has a LayerNorm of its own, with its own "
                    "learned weight: norm1 before the attention, norm2 before the feed-forward.",
                    "zh": "两个子层都用了 norm1。每个子层都有自己的 LayerNorm，各自有学到的权重：注意力之前用 norm1，"
                    "前馈网络之前用 norm2。",
                },
            ),
            Mistake(
                "NORMS_SWAPPED",
                _norms_swapped,
                {
                    "en": "The norms are swapped: norm2 before the attention and norm1 before the feed-forward. "
                    "norm1 belongs to the first sub-layer (the attention), norm2 to the second (the "
                    "feed-forward), as in nn.TransformerEncoderLayer.",
                    "zh": "两个归一化用反了：注意力之前用了 norm2，前馈网络之前用了 norm1。norm1 属于第一个子层（注意力），"
                    "norm2 属于第二个子层（前馈网络），与 nn.TransformerEncoderLayer 一致。",
                },
            ),
            Mistake(
                "MASK_NOT_PASSED",
                _mask_not_passed,
                {
                    "en": "key_padding_mask is not passed to self_attention, so every position attends to the "
                    "padding too. Pass it on: self_attention(norm1(x), key_padding_mask).",
                    "zh": "没有把 key_padding_mask 传给 self_attention，于是每个位置也关注了填充位置。应把它传下去："
                    "self_attention(norm1(x), key_padding_mask)。",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                _mask_inverted,
                {
                    "en": "The mask passed to self_attention is inverted (~key_padding_mask): the attention then "
                    "sees only the padding. key_padding_mask already follows the convention self_attention "
                    "expects, PyTorch's: True at padding. Pass it as it is (the course's keep masks, True = may "
                    "attend, are the opposite).",
                    "zh": "传给 self_attention 的掩码取反了（~key_padding_mask）：注意力于是只看得到填充位置。"
                    "key_padding_mask 本来就符合 self_attention 期望的约定，即 PyTorch 的约定：True 表示填充。"
                    "原样传入即可（课程里的保留掩码 True 表示可以关注，正好相反）。",
                },
            ),
            Mistake(
                "FEED_FORWARD_UNNORMALISED",
                _feed_forward_unnormalised,
                {
                    "en": "The feed-forward reads x itself, not normalised. In a pre-norm layer both sub-layers read "
                    "a normalised input: x + feed_forward(norm2(x)).",
                    "zh": "前馈网络读取的是未经归一化的 x。在前归一化层里，两个子层读取的都是归一化后的输入："
                    "x + feed_forward(norm2(x))。",
                },
            ),
            Mistake(
                "PARALLEL",
                _parallel,
                {
                    "en": "Both sub-layers read the layer's input x: x + self_attention(norm1(x)) + "
                    "feed_forward(norm2(x)). That is the parallel layer of some later models (GPT-J, PaLM), "
                    "a design of its own. In the encoder layer asked for here the sub-layers run one after the "
                    "other: the feed-forward reads norm2 of the x that already includes the attention's output.",
                    "zh": "两个子层读取的都是这一层的输入 x：x + self_attention(norm1(x)) + feed_forward(norm2(x))。"
                    "这是后来一些模型（GPT-J、PaLM）使用的并行层，是另一种设计。本题要的编码器层中，两个子层是先后执行的："
                    "前馈网络读取的是已经加上注意力输出之后的 x 再经 norm2 归一化的结果。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 06.decoder_masks
# (source_lengths (B,), source_len L_s, target_lengths (B,), target_len L_t) -> (self_keep
# (B, L_t, L_t), cross_keep (B, L_t, L_s)), bool keep masks (True = may attend):
#     self_keep[b, i, j]  = j <= i and j < target_lengths[b]
#     cross_keep[b, i, j] = j < source_lengths[b]            (the same for every query i)


def _masks_cases(generator):
    del generator  # the lengths are chosen by hand: each case tests an edge
    # (source_lengths, L_s, target_lengths, L_t). First two items, L_s > L_t, L_s longer than every
    # source, every length different (so each mistake runs and shows); then three items with a
    # source and a target as long as their padded lengths, and L_t longer than every target; batch
    # 1 with a target of length 1 (L_t = 1); L_s > L_t with a full target; L_s < L_t with a source
    # of length 1; batch 1 with a full source and a padded target.
    t = torch.tensor
    return [
        (t([5, 3]), 6, t([2, 4]), 4),
        (t([4, 1, 7]), 7, t([5, 5, 2]), 6),
        (t([3]), 3, t([1]), 1),
        (t([2, 6]), 8, t([7, 3]), 7),
        (t([1, 2, 3, 4]), 4, t([4, 1, 3, 2]), 5),
        (t([9]), 9, t([3]), 8),
    ]


def _real(lengths, padded, *, inclusive=False):
    """(B, padded) bool: True at the real tokens (position < length; <= with inclusive)."""
    positions = torch.arange(padded)
    return positions <= lengths[:, None] if inclusive else positions < lengths[:, None]


def _causal(rows, columns, diagonal=0):
    return torch.ones(rows, columns, dtype=torch.bool).tril(diagonal)  # (rows, columns): key j <= query i


def _masks_reference(source_lengths, source_len, target_lengths, target_len):
    B = target_lengths.shape[0]
    self_keep = _causal(target_len, target_len) & _real(target_lengths, target_len)[:, None, :]  # (B, L_t, L_t)
    cross_keep = _real(source_lengths, source_len)[:, None, :].expand(B, target_len, source_len)  # (B, L_t, L_s)
    return self_keep, cross_keep


def _cross(source_lengths, source_len, target_len):
    return _real(source_lengths, source_len)[:, None, :].expand(source_lengths.shape[0], target_len, source_len)


def _with_self(self_keep, source_lengths, source_len, target_len):
    return self_keep, _cross(source_lengths, source_len, target_len)


def _no_causal(source_lengths, source_len, target_lengths, target_len):
    self_keep = _real(target_lengths, target_len)[:, None, :].expand(-1, target_len, -1)
    return _with_self(self_keep, source_lengths, source_len, target_len)


def _causal_inverted(source_lengths, source_len, target_lengths, target_len):
    upper = torch.ones(target_len, target_len, dtype=torch.bool).triu()  # key j >= query i
    return _with_self(upper & _real(target_lengths, target_len)[:, None, :], source_lengths, source_len, target_len)


def _diagonal_excluded(source_lengths, source_len, target_lengths, target_len):
    strict = _causal(target_len, target_len, -1) & _real(target_lengths, target_len)[:, None, :]  # j < i
    return _with_self(strict, source_lengths, source_len, target_len)


def _padding_on_queries(source_lengths, source_len, target_lengths, target_len):
    rows = _causal(target_len, target_len) & _real(target_lengths, target_len)[:, :, None]  # (B, L_t, 1): queries
    return _with_self(rows, source_lengths, source_len, target_len)


def _hides_padded_queries(source_lengths, source_len, target_lengths, target_len):
    self_keep, cross_keep = _masks_reference(source_lengths, source_len, target_lengths, target_len)
    real_queries = _real(target_lengths, target_len)[:, :, None]  # (B, L_t, 1)
    return self_keep & real_queries, cross_keep & real_queries


def _no_target_padding(source_lengths, source_len, target_lengths, target_len):
    B = target_lengths.shape[0]
    return _with_self(_causal(target_len, target_len).expand(B, -1, -1), source_lengths, source_len, target_len)


def _cross_from_target_lengths(source_lengths, source_len, target_lengths, target_len):
    self_keep, _ = _masks_reference(source_lengths, source_len, target_lengths, target_len)
    return self_keep, _cross(target_lengths, source_len, target_len)


def _causal_on_cross(source_lengths, source_len, target_lengths, target_len):
    self_keep, cross_keep = _masks_reference(source_lengths, source_len, target_lengths, target_len)
    return self_keep, cross_keep & _causal(target_len, source_len)


def _true_means_masked(*args):
    self_keep, cross_keep = _masks_reference(*args)
    return ~self_keep, ~cross_keep


def _padding_off_by_one(source_lengths, source_len, target_lengths, target_len):
    B = target_lengths.shape[0]
    self_keep = _causal(target_len, target_len) & _real(target_lengths, target_len, inclusive=True)[:, None, :]
    cross_keep = _real(source_lengths, source_len, inclusive=True)[:, None, :].expand(B, target_len, source_len)
    return self_keep, cross_keep


def _head_axis(*args):
    self_keep, cross_keep = _masks_reference(*args)
    return self_keep[:, None], cross_keep[:, None]  # (B, 1, L_t, L_t), (B, 1, L_t, L_s)


def _cross_not_expanded(source_lengths, source_len, target_lengths, target_len):
    self_keep, _ = _masks_reference(source_lengths, source_len, target_lengths, target_len)
    return self_keep, _real(source_lengths, source_len)[:, None, :]  # (B, 1, L_s)


def _swapped_return(*args):
    self_keep, cross_keep = _masks_reference(*args)
    return cross_keep, self_keep


register(
    Exercise(
        id="06.decoder_masks",
        reference=_masks_reference,
        cases=_masks_cases,
        mistakes=(
            Mistake(
                "NO_CAUSAL",
                _no_causal,
                {
                    "en": "self_keep hides only the target's padding: every query still sees the keys after it. "
                    "A decoder's self-attention is causal too: keep key j for query i only when j <= i, "
                    "combined (&) with the padding.",
                    "zh": "self_keep 只遮住了目标序列的填充：每个查询仍然看得到它后面的键。解码器的自注意力还必须是因果的："
                    "只有 j <= i 时查询 i 才保留键 j，再与填充掩码用 & 合并。",
                },
            ),
            Mistake(
                "CAUSAL_INVERTED",
                _causal_inverted,
                {
                    "en": "self_keep keeps the upper triangle: each query sees itself and the future, not the past. "
                    "Keep the lower triangle, key j <= query i: .tril().",
                    "zh": "self_keep 保留的是上三角：每个查询看得到自己和未来，却看不到过去。应保留下三角，即键 j <= 查询 i："
                    "用 .tril()。",
                },
            ),
            Mistake(
                "DIAGONAL_EXCLUDED",
                _diagonal_excluded,
                {
                    "en": "The diagonal is hidden in self_keep, so query i cannot see its own position (and query 0 "
                    "sees nothing). Keep key j when j <= i: .tril() with the default diagonal=0.",
                    "zh": "self_keep 遮住了对角线，查询 i 看不到自己所在的位置（查询 0 更是什么都看不到）。"
                    "键 j <= i 时应保留：用默认 diagonal=0 的 .tril()。",
                },
            ),
            Mistake(
                "PADDING_ON_QUERIES",
                _padding_on_queries,
                {
                    "en": "In self_keep the target's padding hides rows (padded queries) instead of columns (padded "
                    "keys): padded queries see nothing, and nothing hides the padded keys. A padding mask "
                    "hides keys: index it on the last axis, real[:, None, :], then & the causal mask.",
                    "zh": "在 self_keep 中，目标序列的填充遮住的是行（填充位置上的查询），而不是列（填充位置上的键）："
                    "填充位置上的查询什么也看不到，而填充位置上的键却没有被遮住。填充掩码遮的是键：把它放在最后一维上，"
                    "real[:, None, :]，再与因果掩码用 & 合并。",
                },
            ),
            Mistake(
                "HIDES_PADDED_QUERIES",
                _hides_padded_queries,
                {
                    "en": "Your masks also hide every key from the padded target queries (whole rows of both "
                    "masks), so those rows are fully masked. Some code does that on purpose, since the outputs "
                    "of padded positions are thrown away, but this exercise asks for the padding on the keys "
                    "only: padded queries keep their rows (in self_keep they see every real key, all of which "
                    "lie before them).",
                    "zh": "你的掩码还对目标序列中填充位置上的查询遮住了所有键（两个掩码的整行），于是这些行成了全遮蔽行。"
                    "有些代码是有意这样做的，因为填充位置的输出反正会被丢掉；但本练习要求填充只作用在键上：填充位置上的"
                    "查询保留它们的行（在 self_keep 中，它们看得到所有真实的键，这些键都在它们之前）。",
                },
            ),
            Mistake(
                "NO_TARGET_PADDING",
                _no_target_padding,
                {
                    "en": "self_keep is the causal mask alone. For a real query that is enough (the target's "
                    "padding lies in its future), but a padded query then attends to the padding before it. "
                    "This exercise asks for both: the causal mask & the target's padding on the keys.",
                    "zh": "self_keep 只有因果掩码。对真实查询来说这已经够了（目标序列的填充在它的未来），但填充位置上的查询"
                    "就会关注它前面的填充位置。本练习要求两者都有：因果掩码 & 目标序列在键上的填充掩码。",
                },
            ),
            Mistake(
                "CROSS_FROM_TARGET_LENGTHS",
                _cross_from_target_lengths,
                {
                    "en": "cross_keep is built from target_lengths. Its keys are the source positions (the "
                    "encoder's memory), so what it hides is the source's padding: j < source_lengths[b].",
                    "zh": "cross_keep 是用 target_lengths 构造的。它的键是源序列的位置（编码器输出的 memory），所以它要遮住"
                    "的是源序列的填充：j < source_lengths[b]。",
                },
            ),
            Mistake(
                "CAUSAL_ON_CROSS",
                _causal_on_cross,
                {
                    "en": "cross_keep is causal too. The whole source is known before decoding starts, so every "
                    "target query may see every real source position: cross_keep hides only the source's "
                    "padding, the same row for every query.",
                    "zh": "cross_keep 也做成了因果的。解码开始之前整个源序列就已经知道了，所以每个目标查询都可以看到源序列的"
                    "所有真实位置：cross_keep 只遮住源序列的填充，每个查询的那一行都相同。",
                },
            ),
            Mistake(
                "TRUE_MEANS_MASKED",
                _true_means_masked,
                {
                    "en": "Both masks are True where a key is hidden: PyTorch's convention for key_padding_mask and "
                    "bool attn_mask in nn.MultiheadAttention. This exercise returns the course's keep masks: "
                    "True where the query may attend.",
                    "zh": "两个掩码都在应遮住的键上为 True：这是 nn.MultiheadAttention 中 key_padding_mask 和 bool 类型 "
                    "attn_mask 的约定。本练习返回的是课程中的保留掩码：查询可以关注的位置为 True。",
                },
            ),
            Mistake(
                "PADDING_OFF_BY_ONE",
                _padding_off_by_one,
                {
                    "en": "One padding position too many is kept: a sequence of length n uses positions 0 … n − 1 "
                    "(position < length, not <=).",
                    "zh": "多保留了一个填充位置：长度为 n 的序列占据位置 0 … n − 1（位置 < 长度，而不是 <=）。",
                },
            ),
            Mistake(
                "HEAD_AXIS",
                _head_axis,
                {
                    "en": "The masks have a head axis, (B, 1, L_t, L_t) and (B, 1, L_t, L_s), as lesson 02's "
                    "decoder mask had to broadcast against (B, H, L, L) scores. This exercise asks for "
                    "(B, L_t, L_t) and (B, L_t, L_s); add the head axis (.unsqueeze(1)) where the scores need it.",
                    "zh": "掩码带了头这一维：(B, 1, L_t, L_t) 和 (B, 1, L_t, L_s)，就像第 02 课的解码器掩码为了与 "
                    "(B, H, L, L) 的分数广播而做的那样。本练习要的是 (B, L_t, L_t) 和 (B, L_t, L_s)；在分数需要时再加上"
                    "头这一维（.unsqueeze(1)）。",
                },
            ),
            Mistake(
                "CROSS_NOT_EXPANDED",
                _cross_not_expanded,
                {
                    "en": "cross_keep is (B, 1, L_s). It would broadcast against the scores, but this exercise asks "
                    "for the full (B, L_t, L_s), one row per target query: .expand(B, L_t, L_s).",
                    "zh": "cross_keep 的形状是 (B, 1, L_s)。它与分数广播是可以的，但本练习要的是完整的 (B, L_t, L_s)，"
                    "每个目标查询一行：用 .expand(B, L_t, L_s)。",
                },
            ),
            Mistake(
                "SWAPPED_RETURN",
                _swapped_return,
                {
                    "en": "The two masks are returned in the wrong order: return (self_keep, cross_keep), the "
                    "self-attention's mask first.",
                    "zh": "两个掩码的返回顺序颠倒了：应返回 (self_keep, cross_keep)，自注意力的掩码在前。",
                },
            ),
        ),
    )
)
