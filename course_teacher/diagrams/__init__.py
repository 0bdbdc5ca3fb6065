"""The diagrams the lessons' markdown shows, drawn by code in both languages into images/.

``write_all(folder)`` draws every diagram in English and Chinese and returns the files written;
the build calls it before it executes the lessons, so the pictures never drift from the code.
``DIAGRAMS`` names them (with the alt text a lesson's markdown gives each), so tests and lessons
can enumerate them; ``markdown_link(name, lang)`` is the line a lesson's markdown cell uses.

The files are SVG with every letter drawn as a path (matplotlib's ``svg.fonttype = "path"``), so
Chinese shows in any browser without fonts, and they are byte-reproducible: a fixed hash salt, no
date, no creator, no random ids. The course style and its CJK font come from
``viz.use_course_style`` inside ``matplotlib.rc_context`` (``drawing_settings``), so drawing
changes no global setting. A missing glyph is an error, not a warning: a diagram with a hole in a
label never gets written.

Layout of the package: ``sheet`` holds the drawing primitives (colours, ``Sheet``: boxes, text
lines, arrows, legend, laid out in inches); each diagram is one module named after its lesson
(``l01_sdpa``, ``l03_qkv_sources``, ``l05_probsparse``, ``l06_encoder_layer``, ``l06_encoder_decoder``, ...,
``l10_gpt``)
holding its labels in both languages (a table such as ``SDPA``) and the function that draws it in
one language (``sdpa(lang) -> Figure``);
this file registers them and writes the files. To add a diagram: a new module, an entry in ``DIAGRAMS``, then `make notebooks`.
"""

import contextlib
import io
import warnings
from importlib.metadata import version
from pathlib import Path

import matplotlib

from course_utils import viz
from .l01_sdpa import SDPA, sdpa
from .l03_qkv_sources import SOURCES, qkv_sources
from .l05_probsparse import PROBSPARSE, probsparse
from .l06_encoder_decoder import ENCODER_DECODER, encoder_decoder
from .l06_encoder_layer import ENCODER_LAYER, encoder_layer
from .l07_kv_cache import KV_CACHE, kv_cache
from .l08_tiling import TILING, tiling
from .l09_programs import PROGRAMS, programs
from .l10_gpt import DECODER_ONLY, decoder_only
from .sheet import label

__all__ = ["DECODER_ONLY", "DIAGRAMS", "ENCODER_DECODER", "ENCODER_LAYER", "KV_CACHE", "LANGUAGES", "PROBSPARSE",
           "PROGRAMS", "SDPA", "SOURCES", "TILING", "drawing_settings", "file_name", "markdown_link", "svg", "write_all"]

LANGUAGES = ("en", "zh")

# What the SVG writer gets, so two runs write the same bytes: no date, no creator (it would name
# the matplotlib version and a URL), no format/type entries (the type is a URL too).
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
SVG_SETTINGS = {"svg.fonttype": "path", "svg.hashsalt": "attention-course-diagrams", "svg.id": None}
#: The DOCTYPE line matplotlib writes names the SVG 1.1 DTD by URL; browsers ignore it and SVG 2
#: drops it, so the files leave it out and carry only local references.
_DOCTYPE = ('<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n'
            '  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n')

#: Every diagram: name -> (draw(lang) -> Figure, {"en", "zh"} alt text). Files: images/NAME_LANG.svg.
DIAGRAMS = {
    "01_sdpa": (sdpa, label("Scaled dot-product attention, step by step", "缩放点积注意力的计算步骤")),
    "03_qkv_sources": (qkv_sources, label("Where Q, K and V come from: encoder self-attention, decoder "
                                          "self-attention and cross-attention",
                                          "Q、K、V 从哪里来：编码器自注意力、解码器自注意力与交叉注意力")),
    "05_probsparse": (probsparse, label("ProbSparse attention: sample keys, rate each query by M = max − mean, "
                                        "full attention for the top u queries, the mean of the values for the "
                                        "lazy rest",
                                        "ProbSparse 注意力：采样键，用 M = 最大值 − 均值为每个查询打分，"
                                        "M 最大的 u 个查询做完整注意力，其余惰性查询取值的均值")),
    "06_encoder_layer": (encoder_layer, label("One Transformer encoder layer, post-norm (LayerNorm after each residual "
                                              "add, on the main path) beside pre-norm (LayerNorm at the start of each "
                                              "sub-layer, an unbroken identity path from input to output)",
                                              "Transformer 编码器层的两种归一化顺序：后归一化（层归一化在每次残差相加之后，"
                                              "位于主路径上）与前归一化（层归一化在每个子层的开头，从输入到输出有一条"
                                              "不间断的恒等路径）")),
    "06_encoder_decoder": (encoder_decoder, label("A one-layer pre-norm encoder–decoder (a LayerNorm before each "
                                                  "sub-layer, a final LayerNorm after each stack): the source padding "
                                                  "mask in the encoder's self-attention and the decoder's "
                                                  "cross-attention, the target mask (causal and target padding) in "
                                                  "the decoder's self-attention",
                                                  "单层前归一化编码器–解码器（每个子层之前一个层归一化，每个堆叠最后再接一个层归一化）："
                                                  "源填充掩码用于编码器的自注意力和解码器的交叉注意力，"
                                                  "目标掩码（因果掩码加目标序列的填充）用于解码器的自注意力")),
    "07_kv_cache": (kv_cache, label("One decode step with a KV cache: the new token's query, key and value, RoPE at "
                                    "its position, its key and value appended to the caches, and its 4 query heads "
                                    "attending over 2 key/value heads",
                                    "带 KV 缓存的一个解码步：新词元的查询、键和值，按其位置做 RoPE，把它的键和值追加进缓存，"
                                    "4 个查询头在 2 个键/值头上做注意力")),
    "08_tiling": (tiling, label("Causal tiled attention: a grid of query blocks by key/value blocks, those below the "
                                "diagonal computed, those on it masked, those above it skipped; for each query block "
                                "a running max, a running sum and an accumulator, updated tile by tile, then the "
                                "output and the log-sum-exp",
                                "因果分块注意力：查询分块 × 键/值分块的网格，对角线以下的分块直接计算，对角线上的分块加掩码，"
                                "对角线以上的分块跳过；每个查询分块保留运行最大值、累计和与累加器，逐块更新，最后得到输出和 "
                                "log-sum-exp")),
    "09_programs": (programs, label("A Triton kernel's grid: one program per query block; in the GPU's main memory "
                                    "(HBM) Q, K, V and O as blocks; program 2 loads its query block once into its "
                                    "fast memory (SRAM), streams the key and value blocks through it one at a time "
                                    "with its running max, sum and accumulator, and writes its output block and "
                                    "log-sum-exp once",
                                    "Triton 核函数的网格：每个查询块一个程序；GPU 主存（HBM）里的 Q、K、V 和 O 都分成块；"
                                    "程序 2 把自己的查询块读入片上存储（SRAM）一次，让键块和值块一块一块地流过，"
                                    "同时保留运行最大值、累计和与累加器，最后把输出块和 log-sum-exp 各写回一次")),
    "10_gpt": (decoder_only, label("A decoder-only GPT: characters to ids, token and position embeddings, N pre-norm "
                                   "blocks (masked multi-head self-attention and an MLP, each added to the residual "
                                   "stream), a final LayerNorm, the read-out tied to the embedding, the next-character "
                                   "distribution; beside it, generation with one KV cache per block",
                                   "仅解码器的 GPT：字符变成编号，词元嵌入加位置嵌入，N 个前归一化的块（带掩码的多头自注意力和 "
                                   "MLP，各自的输出加回残差流），最后的层归一化，与嵌入共享权重的读出层，下一个字符的分布；"
                                   "旁边是生成时的情形：每个块一个 KV 缓存")),
}


def file_name(name, lang):
    return f"{name}_{lang}.svg"


def markdown_link(name, lang):
    """The markdown line that shows diagram `name` in a lesson's `lang` cell."""
    return f"![{DIAGRAMS[name][1][lang]}](../../images/{file_name(name, lang)})"


@contextlib.contextmanager
def drawing_settings():
    """The settings every diagram is drawn under, restored on exit: matplotlib's defaults (not
    the caller's settings or matplotlibrc: the same picture everywhere), the course style, the
    reproducible SVG settings; a glyph no font has raises instead of leaving a hole."""
    with matplotlib.rc_context(), warnings.catch_warnings():
        warnings.filterwarnings("error", message=r"Glyph .* missing from", category=UserWarning)
        matplotlib.rcdefaults()
        viz.use_course_style()
        matplotlib.rcParams.update(SVG_SETTINGS)
        yield


def svg(name, lang):
    """Diagram `name` in `lang`, as the bytes of its SVG file."""
    draw = DIAGRAMS[name][0]
    with drawing_settings():
        figure = draw(lang)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata=SVG_METADATA)
    text = buffer.getvalue().replace(_DOCTYPE, "")
    # (the stamp names the files' old single module: kept so that the committed files stay the same)
    stamp = (f"<!-- Drawn by course_teacher/diagrams/ with matplotlib {version('matplotlib')} and mplfonts "
             f"{version('mplfonts')}: edit the code, then run `make notebooks`. -->\n")
    first, rest = text.split("\n", 1)  # after the <?xml ...?> declaration
    return (first + "\n" + stamp + rest).encode("utf-8")


def write_all(folder):
    """Draw every diagram in every language into `folder`; return the paths, in DIAGRAMS order.
    A file whose bytes are already right is left alone (its modification time too)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in DIAGRAMS:
        for lang in LANGUAGES:
            path = folder / file_name(name, lang)
            data = svg(name, lang)
            if not path.exists() or path.read_bytes() != data:
                path.write_bytes(data)
            paths.append(path)
    return paths
