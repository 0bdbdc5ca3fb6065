"""Lesson 06's exercises: the sinusoidal positional encoding, the matrix that moves it k positions
on, and a post-norm decoder layer's forward pass from its given sub-layers.

The references are written here in plain code (tests/test_exercises_l06.py proves they agree with
``course_utils.transformer`` and PyTorch's ``nn.TransformerDecoderLayer``, values and gradients); the
package's ``sinusoidal_encoding`` and ``offset_rotation`` and the ``forward`` of the course's and
PyTorch's encoder and decoder layers are forbidden, so a learner cannot pass by calling them.

Every argument varies on its own across the cases, so a function that ignores one, or uses one
size where another is meant, fails somewhere:

- 06.sinusoidal_encoding: length 1, d_model 1 and 2 (one pair, where every base gives the same
  table), odd d_model (the last feature a sine without its cosine), length > d_model and
  d_model > length, and 5001 positions (one more than a table precomputed for max_len = 5000);
- 06.offset_rotation: k = 0 (the identity), k = 1, negative k, a k of thousands of positions,
  d_model 2 (one pair) up to 32;
- 06.post_norm_decoder: batch 1, a target of length 1, a memory of length 1, L_s = L_t, L_s > L_t
  and L_s < L_t, one head and eight, E and d_ff unrelated, either padding mask None on its own and
  both, full and padded items on each side (none all padding), float64; the inputs are far from
  normalised (a common offset, a spread of 2) and the three LayerNorms have different weights, so
  that a norm in the wrong place, or the wrong one, shows.

The first case of each exercise is one where every known mistake runs, so a mistake is recognised
by its output. No tensor a case passes is all zeros (or all False), so a check that compares a
case's inputs before and after the call sees an in-place edit of any of them. The grader's hidden
cases (``hidden``) keep those edges at sizes drawn from the teacher's seed, within each text's rules,
and hold no public case (each has sizes of its own).

The decoder layer's sub-layers cannot be passed to the learner's function as modules (a case is
plain data: the grader sends it to the notebook's kernel as tensors, numbers and lists), so the
function takes the layer's weight tensors, as ``nn.TransformerDecoderLayer(..., bias=False)``
stores them, and the exercise cell gives the six sub-layers built from them (``decoder_sublayers``
here is the same code). The learner writes the wiring: the norm order, the residuals, which input
and which mask each attention gets. Every weight is an argument of its own, so the check compares
the gradients with respect to each of them as well as to x and memory.
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
    # odd d_model (5 and 3: the last feature a sine), more features than positions, 40 positions
    # (the table's full range of frequencies, p up to 39), and 5001 positions of one feature: one
    # more than a table precomputed for max_len = 5000 holds (one feature, angle p·1: exact in
    # float32 too, so a float32 computation stays well inside the tolerance there).
    return [(6, 8), (1, 4), (10, 2), (7, 5), (3, 12), (20, 3), (40, 16), (LONG, 1)]


#: The longest public case: one position more than a precomputed max_len = 5000 table.
LONG = 5001


def _hidden_sinusoidal_cases(generator):
    """The grader's hidden cases: the public edges at sizes drawn from its generator (length 1,
    d_model 2, odd d_model, more features than positions and more positions than features, a few dozen
    positions, a table longer than the 5000 positions a precomputed table usually holds), never a public
    case's (length, d_model). The long table keeps d_model at most 4, as the public one keeps it at 1:
    its angles, p·1 (exact in float32) and p·ω_1 (at most 6000·0.01 radians), stay within the tolerance
    computed in float32 too, as they must: float64 angles are advised, not required."""
    g = generator
    public = set(_sinusoidal_cases(None))

    def case(length, d_model):
        while (drawn := (length(), d_model())) in public:
            pass
        return drawn

    def one(low, high):
        return _sizes(g, 1, low, high)[0]

    return [
        case(lambda: one(5, 9), lambda: 2 * one(5, 8)),  # even, unequal sizes
        case(lambda: 1, lambda: one(2, 16)),  # position 0 only
        case(lambda: one(2, 30), lambda: 2),  # one pair
        case(lambda: one(4, 20), lambda: 2 * one(1, 8) + 1),  # odd d_model: the last feature a sine
        case(lambda: one(2, 4), lambda: one(5, 16)),  # more features than positions
        case(lambda: one(10, 30), lambda: 2 * one(1, 4) + 1),  # more positions than features, odd
        case(lambda: one(30, 64), lambda: 2 * one(6, 16)),  # the table's range of frequencies
        case(lambda: one(LONG, 6000), lambda: one(1, 4)),  # longer than a table precomputed for 5000 positions
    ]


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


def _table_of_5000(length, d_model):
    """A table precomputed for max_len = 5000 positions and sliced: pe[:length] stops at 5000 rows."""
    return _sinusoidal_reference(min(length, 5000), d_model)


def _angle_inverted(length, d_model):
    pairs = (d_model + 1) // 2
    growing = BASE ** (2.0 * torch.arange(pairs, dtype=torch.float64) / d_model)  # base^(2i/E), not its inverse
    return _with_angles(torch.arange(length, dtype=torch.float64)[:, None] * growing, d_model)


def _integer_exponent(length, d_model):
    return _with_angles(_angles(length, d_model, pair_factor=0.0), d_model)  # (2i) // E = 0: every ω_i = 1


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
                "TABLE_OF_5000",
                _table_of_5000,
                {
                    "en": "Right up to 5000 positions, but a longer table stops at row 5000: the table was "
                    "computed once for max_len = 5000 (as a widely copied implementation does) and sliced, "
                    "pe[:length], which silently returns fewer rows. The sines and cosines are defined at "
                    "every position: compute the table for the `length` positions asked for.",
                    "zh": "5000 个位置以内都是对的，但更长的表只有 5000 行：表是按 max_len = 5000 预先算好的（一个"
                    "流传很广的实现就是这样做的），再切片 pe[:length]，而切片超出范围时会悄悄地少返回几行。正弦和"
                    "余弦在任何位置都有定义：按要求的 `length` 个位置计算这张表。",
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
            Mistake(
                "INTEGER_EXPONENT",
                _integer_exponent,
                {
                    "en": "Every pair turns at the same speed, one radian per position: the exponent 2i / E was computed "
                    "with integer division (2 * i // d_model), which is 0 for every pair. Divide with /, as floats: "
                    "10000 ** (2 * i / d_model).",
                    "zh": "每一对特征都以同样的速度旋转，每个位置转 1 弧度：指数 2i / E 是用整数除法算的"
                    "（2 * i // d_model），对每一对都等于 0。应当用 / 做浮点除法：10000 ** (2 * i / d_model)。",
                },
            ),
        ),
    )
)




# ----------------------------------------------------------------------------- 06.offset_rotation
# (k, d_model) -> (E, E) float64 R_k with PE[p + k] = PE[p] @ R_kᵀ for every position p: block
# diagonal, one 2×2 block [[cos φ_i, sin φ_i], [−sin φ_i, cos φ_i]] per pair i (features 2i, 2i + 1),
# φ_i = k · 10000^(−2i/E). E even.


def _rotation_cases(generator):
    del generator  # the sizes are chosen by hand: each case tests an edge
    # (k, d_model). First k = 3 and four pairs, so that every mistake runs and shows; then k = 0
    # (the identity), a negative k, one pair (d_model 2: ω = 1 whatever the exponent), k = 1 (one
    # step), a wide matrix with a large k (angles of thousands of radians: float64 keeps them), a
    # negative k of a large size, and a large negative k of a size of its own (chosen so that angles
    # computed in float32, however they are written, miss by about twice the tolerance).
    return [(3, 8), (0, 6), (-2, 4), (5, 2), (1, 10), (5003, 16), (-40, 32), (-5963, 24)]


def _hidden_rotation_cases(generator):
    """The grader's hidden cases: the public edges at sizes drawn from its generator (k = 0, k = 1, a
    negative k, one pair, offsets of thousands of positions either way on wide matrices), k any integer
    and d_model even as the text says, never a public case's (k, d_model)."""
    g = generator
    public = set(_rotation_cases(None))

    def case(k, d_model):
        while (drawn := (k(), 2 * d_model())) in public:
            pass
        return drawn

    def one(low, high):
        return _sizes(g, 1, low, high)[0]

    return [
        case(lambda: one(2, 9), lambda: one(2, 8)),  # every mistake runs
        case(lambda: 0, lambda: one(1, 16)),  # the identity
        case(lambda: 1, lambda: one(1, 16)),  # one step
        case(lambda: one(-30, -1), lambda: one(1, 12)),  # back
        case(lambda: one(2, 60), lambda: 1),  # one pair
        case(lambda: one(1000, 6000), lambda: one(8, 16)),  # angles of thousands of radians
        case(lambda: one(-6000, -1000), lambda: one(8, 16)),
    ]


def _rotation(k, d_model, *, exponent=2.0, sign=1.0, steps=None, dtype=torch.float64, halves=False):
    """R_k, or one of its mistaken forms (see the mistakes below)."""
    pairs = d_model // 2
    omega = BASE ** (-sign * exponent * torch.arange(pairs, dtype=torch.float64) / d_model)  # (E/2,)
    phi = (k if steps is None else steps) * omega  # (E/2,): the angle each pair turns by
    c, s = phi.cos(), phi.sin()
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    sine, cosine = (torch.arange(pairs), torch.arange(pairs) + pairs) if halves else (
        torch.arange(0, d_model, 2), torch.arange(1, d_model, 2))
    # row = the feature written, column = the feature read: sin(θ + φ) = cos φ · sin θ + sin φ · cos θ
    R[sine, sine], R[sine, cosine] = c, s
    R[cosine, sine], R[cosine, cosine] = -s, c  # cos(θ + φ) = −sin φ · sin θ + cos φ · cos θ
    return R.to(dtype)


def _rotation_reference(k, d_model):
    return _rotation(k, d_model)


def _rotation_transposed(k, d_model):
    return _rotation(k, d_model).T.contiguous()  # = R_(−k): moves k positions back


def _rotation_one_step(k, d_model):
    return _rotation(k, d_model, steps=1)  # the angle ω_i, not k·ω_i


def _rotation_halves(k, d_model):
    return _rotation(k, d_model, halves=True)  # pairs (i, i + E/2): all the sines first


def _rotation_pair_index_without_two(k, d_model):
    return _rotation(k, d_model, exponent=1.0)


def _rotation_angle_inverted(k, d_model):
    return _rotation(k, d_model, sign=-1.0)


def _rotation_last_pair_missing(k, d_model):
    R = _rotation(k, d_model)
    R[-2:, -2:] = 0.0  # a loop over range(d_model // 2 - 1): the last pair's block never written
    return R


def _rotation_float32(k, d_model):
    return _rotation(k, d_model, dtype=torch.float32)


register(
    Exercise(
        id="06.offset_rotation",
        reference=_rotation_reference,
        cases=_rotation_cases,
        hidden=_hidden_rotation_cases,
        forbidden=("course_utils.transformer.offset_rotation",),
        mistakes=(
            Mistake(
                "TRANSPOSED",
                _rotation_transposed,
                {
                    "en": "Your matrix moves every encoding k positions back: PE[p] @ Rᵀ gives PE[p − k] (it is "
                    "R_−k, the transpose of R_k). With the sine first, pair i's block, acting on the column "
                    "(sin θ, cos θ), is [[cos φ, sin φ], [−sin φ, cos φ]]: sin(θ + φ) = cos φ · sin θ + sin φ · cos θ "
                    "and cos(θ + φ) = −sin φ · sin θ + cos φ · cos θ. (The textbook block [[cos, −sin], [sin, cos]] "
                    "is for a column that starts with the cosine.)",
                    "zh": "你的矩阵把每个编码往回移动了 k 个位置：PE[p] @ Rᵀ 得到的是 PE[p − k]（它是 R_−k，即 R_k 的"
                    "转置）。正弦在前时，第 i 对的块作用在列向量 (sin θ, cos θ) 上，是 [[cos φ, sin φ], [−sin φ, cos φ]]："
                    "sin(θ + φ) = cos φ · sin θ + sin φ · cos θ，cos(θ + φ) = −sin φ · sin θ + cos φ · cos θ。"
                    "（教科书上的 [[cos, −sin], [sin, cos]] 适用于余弦在前的列向量。）",
                },
            ),
            Mistake(
                "ONE_STEP",
                _rotation_one_step,
                {
                    "en": "Every pair turns by ω_i, one position's angle, whatever k is: your matrix is R_1. Moving k "
                    "positions on turns pair i by k·ω_i: φ_i = k / 10000^(2i / d_model).",
                    "zh": "不管 k 是多少，每一对都只转了 ω_i，也就是一个位置的角度：你的矩阵是 R_1。向后移动 k 个位置，"
                    "第 i 对要转 k·ω_i：φ_i = k / 10000^(2i / d_model)。",
                },
            ),
            Mistake(
                "HALVES",
                _rotation_halves,
                {
                    "en": "Your blocks rotate feature i together with feature i + d_model/2, as if all the sines came "
                    "first and then all the cosines. In the encoding of this lesson the sine and the cosine of "
                    "pair i sit side by side, features 2i and 2i + 1: each 2×2 block sits on the diagonal, rows "
                    "and columns 2i and 2i + 1 (torch.block_diag of the blocks).",
                    "zh": "你的块把特征 i 和特征 i + d_model/2 放在一起旋转，好像先放全部正弦、再放全部余弦。本课的编码里，"
                    "第 i 对的正弦和余弦相邻，是特征 2i 和 2i + 1：每个 2×2 块都在对角线上，占第 2i、2i + 1 行和列"
                    "（可以用 torch.block_diag 把这些块拼起来）。",
                },
            ),
            Mistake(
                "PAIR_INDEX_WITHOUT_TWO",
                _rotation_pair_index_without_two,
                {
                    "en": "Pair i turns at ω_i = 10000^(−i / d_model): the exponent lost its factor 2. It is "
                    "2i / d_model, i the pair's index, the same frequencies as the encoding's: "
                    "ω_i = 10000^(−2i / d_model).",
                    "zh": "第 i 对的频率成了 ω_i = 10000^(−i / d_model)：指数丢了因子 2。指数应为 2i / d_model，其中 i 是"
                    "这一对的索引，与编码用的频率相同：ω_i = 10000^(−2i / d_model)。",
                },
            ),
            Mistake(
                "ANGLE_INVERTED",
                _rotation_angle_inverted,
                {
                    "en": "The frequencies grow with i: ω_i = 10000^(+2i / d_model). They shrink, as in the encoding: "
                    "ω_i = 10000^(−2i / d_model), one radian per position for pair 0 and slower after it.",
                    "zh": "频率随 i 增大了：ω_i = 10000^(+2i / d_model)。与编码一样，频率应当递减：ω_i = 10000^(−2i / d_model)，"
                    "第 0 对每个位置转 1 弧度，之后各对越来越慢。",
                },
            ),
            Mistake(
                "FLOAT32",
                _rotation_float32,
                {
                    "en": "The numbers are right but the matrix's dtype is float32. This exercise asks for float64, "
                    "like transformer.offset_rotation: k·ω_i reaches thousands of radians, and float64 keeps its "
                    "digits. Build the angles in float64 and return the matrix in float64.",
                    "zh": "数值是对的，但矩阵的 dtype 是 float32。本练习要的是 float64，与 transformer.offset_rotation "
                    "一样：k·ω_i 可以大到几千弧度，float64 才能保留足够的有效数字。用 float64 计算角度，并以 float64 返回矩阵。",
                },
            ),
            Mistake(
                "LAST_PAIR_MISSING",
                _rotation_last_pair_missing,
                {
                    "en": "The last pair's block is all zeros: the loop over the pairs stops one short. There are "
                    "d_model // 2 pairs, i = 0 … d_model // 2 − 1: range(d_model // 2).",
                    "zh": "最后一对特征的块全是 0：遍历特征对的循环少走了一步。一共有 d_model // 2 对，"
                    "i = 0 … d_model // 2 − 1：应写 range(d_model // 2)。",
                },
            ),
        ),
    )
)


# ----------------------------------------------------------------------------- 06.post_norm_decoder
# x (B, L_t, E), memory (B, L_s, E), tgt_key_padding_mask (B, L_t) / memory_key_padding_mask
# (B, L_s) bool, True at padding, or None; the weights of a bias-free post-norm
# nn.TransformerDecoderLayer; num_heads -> (B, L_t, E):
#     x = norm1(x + self_attention(x, tgt_key_padding_mask, causal=True))
#     x = norm2(x + cross_attention(x, memory, memory_key_padding_mask))
#     x = norm3(x + feed_forward(x))


def decoder_sublayers(norm1_weight, self_in_proj_weight, self_out_proj_weight, norm2_weight, cross_in_proj_weight,
                       cross_out_proj_weight, norm3_weight, linear1_weight, linear2_weight, num_heads):
    """(norm1, norm2, norm3, self_attention, cross_attention, feed_forward): the sub-layers the
    exercise cell gives, the same code; each keeps the (B, L, E) layout."""
    E = norm1_weight.shape[0]

    def attention(h, context, in_proj_weight, out_proj_weight, key_padding_mask, causal):
        B, L_q, L_k = h.shape[0], h.shape[1], context.shape[1]
        q = F.linear(h, in_proj_weight[:E])  # (B, L_q, E)
        k, v = F.linear(context, in_proj_weight[E:]).chunk(2, dim=-1)  # (B, L_k, E) each
        q, k, v = (t.view(B, -1, num_heads, E // num_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, L, d)
        keep = torch.ones(L_q, L_k, dtype=torch.bool, device=h.device)  # where the inputs are (a GPU's too)
        if causal:
            keep = keep.tril()  # key j <= query i
        if key_padding_mask is not None:
            keep = keep & ~key_padding_mask[:, None, None, :]  # (B, 1, L_q, L_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(E // num_heads)  # (B, H, L_q, L_k)
        weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1).nan_to_num(0.0)  # a row with no key: 0
        out = (weights @ v).transpose(1, 2).reshape(B, L_q, E)
        return F.linear(out, out_proj_weight)

    def norm1(h):
        return F.layer_norm(h, (E,), norm1_weight)

    def norm2(h):
        return F.layer_norm(h, (E,), norm2_weight)

    def norm3(h):
        return F.layer_norm(h, (E,), norm3_weight)

    def self_attention(h, key_padding_mask=None, causal=False):
        return attention(h, h, self_in_proj_weight, self_out_proj_weight, key_padding_mask, causal)

    def cross_attention(h, memory, key_padding_mask=None, causal=False):
        return attention(h, memory, cross_in_proj_weight, cross_out_proj_weight, key_padding_mask, causal)

    def feed_forward(h):
        return F.linear(F.relu(F.linear(h, linear1_weight)), linear2_weight)

    return norm1, norm2, norm3, self_attention, cross_attention, feed_forward


#: The names of the decoder layer's weights in nn.TransformerDecoderLayer's state dict, in the
#: exercise's argument order.
DECODER_WEIGHTS = ("norm1.weight", "self_attn.in_proj_weight", "self_attn.out_proj.weight", "norm2.weight",
                   "multihead_attn.in_proj_weight", "multihead_attn.out_proj.weight", "norm3.weight",
                   "linear1.weight", "linear2.weight")


def _padding(lengths, padded):
    """(B, padded) bool, True at padding (right-padded sequences of `lengths`), or None for None."""
    return None if lengths is None else torch.arange(padded) >= torch.tensor(lengths)[:, None]


def _decoder_case(g, batch, target_len, source_len, embed, heads, d_ff, target_lengths, source_lengths,
                  dtype=torch.float32):
    x = 2.0 * randn(g, batch, target_len, embed) + 1.0  # far from normalised: where the norms sit shows
    memory = 1.5 * randn(g, batch, source_len, embed) - 0.5
    weights = (
        1.0 + 0.3 * randn(g, embed),  # norm1_weight
        randn(g, 3 * embed, embed) / math.sqrt(embed),  # self_in_proj_weight
        randn(g, embed, embed) / math.sqrt(embed),  # self_out_proj_weight
        1.0 + 0.3 * randn(g, embed),  # norm2_weight: another one
        randn(g, 3 * embed, embed) / math.sqrt(embed),  # cross_in_proj_weight
        randn(g, embed, embed) / math.sqrt(embed),  # cross_out_proj_weight
        1.0 + 0.3 * randn(g, embed),  # norm3_weight: a third
        randn(g, d_ff, embed) / math.sqrt(embed),  # linear1_weight
        randn(g, embed, d_ff) / math.sqrt(d_ff),  # linear2_weight
    )
    return (x.to(dtype), memory.to(dtype), _padding(target_lengths, target_len), _padding(source_lengths, source_len),
            *(w.to(dtype) for w in weights), heads)


def _decoder_cases(generator):
    # (B, L_t, L_s, E, H, d_ff, target lengths, source lengths). First every item padded on both
    # sides and L_s = L_t, so that every mistake runs (the decoder's own input as memory, or the two
    # masks swapped, only fit when L_s = L_t) and shows; then L_s > L_t with a full target and a full
    # source; batch 1, one head, L_s < L_t; a target of length 1 and a source of length 1; no
    # target padding mask (None) with eight heads; no memory padding mask; neither, with a memory of
    # one position and d_ff unrelated to E; float64.
    g = generator
    return [
        _decoder_case(g, 2, 5, 5, 8, 2, 16, [3, 4], [4, 2]),
        _decoder_case(g, 3, 4, 7, 12, 3, 20, [4, 2, 3], [7, 3, 5]),
        _decoder_case(g, 1, 6, 3, 6, 1, 10, [4], [2]),
        _decoder_case(g, 2, 1, 4, 8, 4, 8, [1, 1], [4, 1]),
        _decoder_case(g, 2, 5, 6, 16, 8, 24, None, [6, 3]),
        _decoder_case(g, 2, 4, 5, 8, 2, 12, [4, 2], None),
        _decoder_case(g, 3, 3, 1, 4, 2, 32, None, None),
        _decoder_case(g, 2, 5, 4, 8, 2, 12, [5, 3], [2, 4], dtype=torch.float64),
    ]


def _hidden_decoder_cases(generator):
    """The grader's hidden cases: the public edges at sizes drawn from its generator (every item padded
    on both sides with L_s = L_t, full targets and sources with L_s > L_t, batch 1 and one head with
    L_s < L_t, a target of length 1 beside a source item of length 1, each padding mask None on its own
    and both, a memory of one position, float64), with sequences longer than any public one; the heads
    divide E, as the text says, E is at least 4 and every sequence has a real token (as in the public
    cases)."""
    g = generator

    def one(low, high):
        return _sizes(g, 1, low, high)[0]

    def lengths(batch, length, low=1, high=None):
        return _sizes(g, batch, low, length if high is None else high)

    def heads_and_embed(heads):
        # E >= 4, as in every public case. Over E = 1 or 2 features a layer norm keeps only the sign of
        # one difference, which near 0 is rounding: its gradient then depends on how the sums run (one
        # batch or a loop over it, float32 or float64), which the text leaves open (seed 8231 failed two
        # right answers so). The same one draw as before: the other sizes stay as they were.
        low = -(-4 // heads)
        return heads, heads * one(low, low + 3)

    cases = []
    batch, length = one(2, 3), one(8, 9)  # L_s = L_t, longer than any public sequence
    heads, embed = heads_and_embed([1, 2, 4][one(0, 2)])
    cases.append(_decoder_case(g, batch, length, length, embed, heads, one(2, 24),
                               lengths(batch, length, 1, length - 1), lengths(batch, length, 1, length - 1)))
    batch, target_len = one(1, 3), one(2, 5)
    source_len = one(target_len + 1, 8)
    heads, embed = heads_and_embed([1, 2, 4][one(0, 2)])
    cases.append(_decoder_case(g, batch, target_len, source_len, embed, heads, one(2, 24), [target_len] * batch,
                               [source_len] * batch))  # full on both sides
    source_len = one(1, 5)
    target_len = one(source_len + 1, 8)
    heads, embed = heads_and_embed(1)
    cases.append(_decoder_case(g, 1, target_len, source_len, embed, heads, one(2, 24), lengths(1, target_len),
                               lengths(1, source_len)))
    batch, source_len = one(2, 3), one(2, 7)
    heads, embed = heads_and_embed([2, 4][one(0, 1)])
    source_lengths = lengths(batch, source_len)
    source_lengths[one(0, batch - 1)] = 1
    cases.append(_decoder_case(g, batch, 1, source_len, embed, heads, one(2, 24), [1] * batch, source_lengths))
    batch, target_len, source_len = one(1, 3), one(2, 7), one(2, 7)
    heads, embed = heads_and_embed([4, 8][one(0, 1)])
    cases.append(_decoder_case(g, batch, target_len, source_len, embed, heads, one(2, 24), None,
                               lengths(batch, source_len)))
    batch, target_len, source_len = one(1, 3), one(2, 7), one(2, 7)
    heads, embed = heads_and_embed([1, 2, 4][one(0, 2)])
    cases.append(_decoder_case(g, batch, target_len, source_len, embed, heads, one(2, 24), lengths(batch, target_len),
                               None))
    batch, target_len = one(1, 3), one(2, 7)
    heads, embed = heads_and_embed([1, 2][one(0, 1)])
    cases.append(_decoder_case(g, batch, target_len, 1, embed, heads, one(2, 40), None, None))  # a memory of one
    batch, target_len, source_len = one(1, 3), one(2, 7), one(2, 7)
    heads, embed = heads_and_embed([1, 2, 4][one(0, 2)])
    cases.append(_decoder_case(g, batch, target_len, source_len, embed, heads, one(2, 24), lengths(batch, target_len),
                               lengths(batch, source_len), dtype=torch.float64))
    return cases


def _decoder_reference(x, memory, tgt_key_padding_mask, memory_key_padding_mask, norm1_weight, self_in_proj_weight,
                       self_out_proj_weight, norm2_weight, cross_in_proj_weight, cross_out_proj_weight, norm3_weight,
                       linear1_weight, linear2_weight, num_heads):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = decoder_sublayers(
        norm1_weight, self_in_proj_weight, self_out_proj_weight, norm2_weight, cross_in_proj_weight,
        cross_out_proj_weight, norm3_weight, linear1_weight, linear2_weight, num_heads)
    x = norm1(x + self_attention(x, tgt_key_padding_mask, causal=True))  # each norm after its residual add
    x = norm2(x + cross_attention(x, memory, memory_key_padding_mask))
    return norm3(x + feed_forward(x))


def _decoder_mistake(wiring):
    """A mistaken decoder layer: `wiring(x, memory, tgt_padding, memory_padding, sublayers)` with the
    sub-layers (norm1, norm2, norm3, self_attention, cross_attention, feed_forward)."""

    def mistake(x, memory, tgt_key_padding_mask, memory_key_padding_mask, *weights_and_heads):
        return wiring(x, memory, tgt_key_padding_mask, memory_key_padding_mask, decoder_sublayers(*weights_and_heads))

    mistake.__name__ = wiring.__name__
    return mistake


@_decoder_mistake
def _pre_norm_decoder(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = x + self_attention(norm1(x), tgt, causal=True)
    x = x + cross_attention(norm2(x), memory, mem)
    return x + feed_forward(norm3(x))


@_decoder_mistake
def _residual_after_norm(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = x + norm1(self_attention(x, tgt, causal=True))
    x = x + norm2(cross_attention(x, memory, mem))
    return x + norm3(feed_forward(x))


@_decoder_mistake
def _no_causal(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt))
    x = norm2(x + cross_attention(x, memory, mem))
    return norm3(x + feed_forward(x))


@_decoder_mistake
def _causal_on_cross(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm2(x + cross_attention(x, memory, mem, causal=True))
    return norm3(x + feed_forward(x))


@_decoder_mistake
def _cross_on_itself(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm2(x + cross_attention(x, x, mem))  # the decoder's own input where the memory belongs
    return norm3(x + feed_forward(x))


@_decoder_mistake
def _masks_swapped(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, mem, causal=True))
    x = norm2(x + cross_attention(x, memory, tgt))
    return norm3(x + feed_forward(x))


@_decoder_mistake
def _mask_inverted(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, ~tgt, causal=True))  # (raises TypeError where a mask is None)
    x = norm2(x + cross_attention(x, memory, ~mem))
    return norm3(x + feed_forward(x))


@_decoder_mistake
def _memory_padding_missing(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm2(x + cross_attention(x, memory))
    return norm3(x + feed_forward(x))


@_decoder_mistake
def _target_padding_missing(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, causal=True))
    x = norm2(x + cross_attention(x, memory, mem))
    return norm3(x + feed_forward(x))


#: The hint of every FLOAT32 mistake here: the right values in float32 where the inputs are float64.
FLOAT32_HINT = {
    "en": "The values are right, but the result is float32 where the inputs are float64: something in your function "
    "forces float32 (a .float(), or a buffer made by torch.zeros(...) or torch.empty(...) without dtype=). Keep "
    "x's dtype: torch.zeros(..., dtype=x.dtype), x.new_zeros(...), or no cast at all.",
    "zh": "数值是对的，但输入是 float64 时结果却是 float32：函数里有什么东西把它变成了 float32（比如 .float()，"
    "或者用 torch.zeros(...)、torch.empty(...) 建缓冲区时没写 dtype=）。应保持 x 的 dtype："
    "torch.zeros(..., dtype=x.dtype)、x.new_zeros(...)，或者干脆不做转换。",
}


@_decoder_mistake
def _no_ffn_residual(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm2(x + cross_attention(x, memory, mem))
    return norm3(feed_forward(x))  # the feed-forward output alone, without x


@_decoder_mistake
def _norms_swapped(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm3(x + cross_attention(x, memory, mem))  # norm3 where norm2 belongs
    return norm2(x + feed_forward(x))  # and norm2 where norm3 belongs


@_decoder_mistake
def _cross_reads_input(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    h = norm1(x + self_attention(x, tgt, causal=True))
    h = norm2(h + cross_attention(x, memory, mem))  # the queries from the layer's input, not from h
    return norm3(h + feed_forward(h))


@_decoder_mistake
def _feed_forward_before_cross(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm2(x + feed_forward(x))  # the feed-forward network second
    return norm3(x + cross_attention(x, memory, mem))  # and the cross-attention last


@_decoder_mistake
def _keep_masks(x, memory, tgt, mem, sub):
    norm1, norm2, norm3, self_attention, cross_attention, feed_forward = sub
    tgt, mem = (None if mask is None else ~mask for mask in (tgt, mem))  # True at the real tokens
    x = norm1(x + self_attention(x, tgt, causal=True))
    x = norm2(x + cross_attention(x, memory, mem))
    return norm3(x + feed_forward(x))


def _decoder_float32(*args):
    return _decoder_reference(*args).float()


register(
    Exercise(
        id="06.post_norm_decoder",
        reference=_decoder_reference,
        cases=_decoder_cases,
        hidden=_hidden_decoder_cases,
        # Three sub-layers and three norms in float32: the reference's own gradients are rounded by up to 1.6e-5
        # (measured against float64 on the grader's seed 24, case 13, where they reach 17), so a right answer that
        # sums in float64 differed from them by more than 1e-5. Every known mistake is off by far more than 1e-4.
        atol=1e-4,
        forbidden=(
            "course_utils.transformer.EncoderLayer.forward",
            "course_utils.transformer.DecoderLayer.forward",
            "torch.nn.TransformerEncoderLayer.forward",
            "torch.nn.TransformerDecoderLayer.forward",
        ),
        mistakes=(
            Mistake(
                "PRE_NORM",
                _pre_norm_decoder,
                {
                    "en": "This is the pre-norm layer (norm_first=True): each sub-layer reads a normalised copy and "
                    "its output is added to x, x = x + self_attention(norm1(x), …). It is a correct layer, but not "
                    "the one asked for. In the post-norm layer of the original paper each norm comes after its "
                    "residual addition: x = norm1(x + self_attention(x, …)), then norm2 around the "
                    "cross-attention and norm3 around the feed-forward network.",
                    "zh": "这是前归一化的层（norm_first=True）：每个子层读取归一化后的副本，输出再加回 x，"
                    "x = x + self_attention(norm1(x), …)。这本身是正确的一种层，但不是本题要的。原论文的后归一化层里，"
                    "每个归一化都在它的残差相加之后：x = norm1(x + self_attention(x, …))，交叉注意力外面是 norm2，"
                    "前馈网络外面是 norm3。",
                },
            ),
            Mistake(
                "RESIDUAL_AFTER_NORM",
                _residual_after_norm,
                {
                    "en": "Each norm is applied to the sub-layer's output alone and the residual is added after it: "
                    "x = x + norm1(self_attention(x, …)). Then nothing normalises the sum, and x keeps growing. "
                    "Post-norm normalises the sum of the input and the sub-layer's output: "
                    "x = norm1(x + self_attention(x, …)).",
                    "zh": "每个归一化只作用在子层的输出上，残差在归一化之后才加：x = x + norm1(self_attention(x, …))。"
                    "这样一来，没有任何东西对和做归一化，x 会越来越大。后归一化归一化的是输入与子层输出之和："
                    "x = norm1(x + self_attention(x, …))。",
                },
            ),
            Mistake(
                "NO_CAUSAL",
                _no_causal,
                {
                    "en": "The self-attention is not causal: each target position also reads the positions after it, "
                    "which at generation time do not exist yet. Pass causal=True to self_attention (and only "
                    "to it).",
                    "zh": "自注意力不是因果的：每个目标位置还读到了它之后的位置，而生成时这些位置还不存在。给 "
                    "self_attention 传 causal=True（只给它传）。",
                },
            ),
            Mistake(
                "CAUSAL_ON_CROSS",
                _causal_on_cross,
                {
                    "en": "The cross-attention is causal too, so target position i reads only source positions "
                    "0 … i. The whole source is known before decoding starts: the cross-attention hides only "
                    "the source's padding, causal=False (its default).",
                    "zh": "交叉注意力也做成了因果的，于是目标位置 i 只读到源位置 0 … i。解码开始之前整个源序列就已经知道了："
                    "交叉注意力只遮住源序列的填充，causal=False（默认值）。",
                },
            ),
            Mistake(
                "CROSS_ON_ITSELF",
                _cross_on_itself,
                {
                    "en": "The cross-attention reads the decoder's own input, cross_attention(x, x, …): a second "
                    "self-attention, and the source never reaches the decoder. Its keys and values come from "
                    "the encoder's output: cross_attention(x, memory, memory_key_padding_mask).",
                    "zh": "交叉注意力读的是解码器自己的输入，cross_attention(x, x, …)：这等于又做了一次自注意力，源序列"
                    "根本到不了解码器。它的键和值来自编码器的输出：cross_attention(x, memory, "
                    "memory_key_padding_mask)。",
                },
            ),
            Mistake(
                "MASKS_SWAPPED",
                _masks_swapped,
                {
                    "en": "The two padding masks are swapped: the self-attention gets the source's padding and the "
                    "cross-attention the target's. A mask belongs to the keys it hides: tgt_key_padding_mask "
                    "(B, L_t) to the self-attention over the target, memory_key_padding_mask (B, L_s) to the "
                    "cross-attention over the memory. (With L_s ≠ L_t the swapped masks do not even fit.)",
                    "zh": "两个填充掩码用反了：自注意力拿到了源序列的填充，交叉注意力拿到了目标序列的填充。掩码属于它遮住的"
                    "那些键：tgt_key_padding_mask (B, L_t) 给作用在目标序列上的自注意力，memory_key_padding_mask "
                    "(B, L_s) 给作用在 memory 上的交叉注意力。（L_s ≠ L_t 时，用反的掩码连形状都对不上。）",
                },
            ),
            Mistake(
                "MASK_INVERTED",
                _mask_inverted,
                {
                    "en": "The padding masks are inverted (~mask): the attentions then see only the padding. The "
                    "masks already follow the convention the given sub-layers expect, PyTorch's: True at "
                    "padding. Pass them as they are (the course's keep masks, True = may attend, are the "
                    "opposite).",
                    "zh": "填充掩码取反了（~mask）：两个注意力于是只看得到填充位置。这两个掩码本来就符合所给子层期望的约定，"
                    "即 PyTorch 的约定：True 表示填充。原样传入即可（课程里的保留掩码 True 表示可以关注，正好相反）。",
                },
            ),
            Mistake(
                "MEMORY_PADDING_MISSING",
                _memory_padding_missing,
                {
                    "en": "memory_key_padding_mask is not passed to the cross-attention, so every target position "
                    "also reads the source's padding. Pass it on: cross_attention(x, memory, "
                    "memory_key_padding_mask).",
                    "zh": "没有把 memory_key_padding_mask 传给交叉注意力，于是每个目标位置也读到了源序列的填充。应把它传下去："
                    "cross_attention(x, memory, memory_key_padding_mask)。",
                },
            ),
            Mistake(
                "TARGET_PADDING_MISSING",
                _target_padding_missing,
                {
                    "en": "tgt_key_padding_mask is not passed to the self-attention. With the causal mask a real "
                    "target position never sees the padding after it, so only the padded positions' outputs "
                    "change; but PyTorch computes those too, and this exercise compares every position. Pass it: "
                    "self_attention(x, tgt_key_padding_mask, causal=True).",
                    "zh": "没有把 tgt_key_padding_mask 传给自注意力。有了因果掩码，真实的目标位置本来就看不到它后面的填充，"
                    "所以只有填充位置的输出会变；但 PyTorch 也会计算这些位置，本练习比较的是每一个位置。应把它传下去："
                    "self_attention(x, tgt_key_padding_mask, causal=True)。",
                },
            ),
            Mistake(
                "NO_FFN_RESIDUAL",
                _no_ffn_residual,
                {
                    "en": "The feed-forward sub-layer has no residual: norm3 gets feed_forward(x) alone. Every sub-layer "
                    "of a post-norm layer adds its output to its input before the norm: "
                    "x = norm3(x + feed_forward(x)).",
                    "zh": "前馈子层没有残差连接：norm3 拿到的只有 feed_forward(x)。后归一化层的每个子层都要先把输出加到"
                    "输入上再做归一化：x = norm3(x + feed_forward(x))。",
                },
            ),
            Mistake(
                "NORMS_SWAPPED",
                _norms_swapped,
                {
                    "en": "norm2 and norm3 trade places: norm3 follows the cross-attention and norm2 the feed-forward "
                    "network. Each norm has weights of its own and belongs to one sub-layer: norm1 after the "
                    "self-attention, norm2 after the cross-attention, norm3 after the feed-forward network.",
                    "zh": "norm2 和 norm3 用反了：交叉注意力后面用了 norm3，前馈网络后面用了 norm2。每个归一化层都有自己的"
                    "权重，各自属于一个子层：自注意力之后是 norm1，交叉注意力之后是 norm2，前馈网络之后是 norm3。",
                },
            ),
            Mistake(
                "CROSS_READS_INPUT",
                _cross_reads_input,
                {
                    "en": "The cross-attention's queries come from the layer's input x, not from the output of the "
                    "self-attention block. The sub-layers run one after the other, each reading what the one "
                    "before it produced: cross_attention(x, memory, ...) with the x that norm1 has just returned.",
                    "zh": "交叉注意力的查询取自整个层的输入 x，而不是自注意力那一块的输出。各个子层依次执行，每个子层读的都是"
                    "前一个子层的结果：cross_attention(x, memory, ...) 里的 x 应是 norm1 刚刚返回的那个。",
                },
            ),
            Mistake(
                "FFN_BEFORE_CROSS",
                _feed_forward_before_cross,
                {
                    "en": "The feed-forward network runs before the cross-attention. A decoder layer's order is "
                    "self-attention, then cross-attention over the memory, then the feed-forward network, "
                    "with norm1, norm2, norm3 in that order.",
                    "zh": "前馈网络跑在了交叉注意力前面。解码器层的顺序是：先自注意力，再对记忆做交叉注意力，最后是前馈网络，"
                    "依次配上 norm1、norm2、norm3。",
                },
            ),
            Mistake(
                "KEEP_MASKS",
                _keep_masks,
                {
                    "en": "Both padding masks were inverted before they were passed on (True at the real tokens). The "
                    "sub-layers take key_padding_mask in PyTorch's convention, True at padding, which is how the "
                    "arguments arrive: pass them as they are.",
                    "zh": "两个填充掩码在传下去之前都被取反了（真实词元处为 True）。子层接收的 key_padding_mask 采用 "
                    "PyTorch 的约定，填充处为 True，而参数传进来时正是这个约定：原样传下去即可。",
                },
            ),
            Mistake("FLOAT32", _decoder_float32, FLOAT32_HINT),
        ),
    )
)
