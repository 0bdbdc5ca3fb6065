"""What lessons 04 and 06 now state in a sentence that points back to lesson 02 §4 instead of showing it
again (issue 28: the fully masked row is taught once): nn.TransformerEncoderLayer's fast path (eval, under
torch.no_grad()) returns NaN for an item that is padding everywhere, where the course's layer returns
finite numbers; and nn.MultiheadAttention's default call returns NaN for an item whose keys are all
padding. Measured with torch 2.13, as the lessons say."""

import torch
from torch import nn

from course_utils.multihead import FusedMultiheadAttention
from course_utils.transformer import EncoderLayer


def test_the_encoder_layers_fast_path_gives_nan_for_an_item_of_padding_only():
    torch.manual_seed(0)
    ours = EncoderLayer(16, 4, 32, dropout=0.1).double().eval()
    theirs = ours.to_torch().eval()
    x = torch.randn(3, 6, 16, dtype=torch.float64)
    padding = torch.arange(6) >= torch.tensor([6, 4, 0])[:, None]  # item 2: nothing but padding
    with torch.no_grad():
        fast, general = theirs(x, src_key_padding_mask=padding), ours(x, key_padding_mask=padding)
    assert fast[2].isnan().all() and general[2].isfinite().all()
    real = ~padding
    assert torch.allclose(fast[:2][real[:2]], general[:2][real[:2]])


def test_multihead_attentions_default_call_gives_nan_for_an_item_of_padding_only():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(8, 2, batch_first=True)
    ours = FusedMultiheadAttention(8, 2)
    x = torch.randn(3, 4, 8)
    padding = torch.arange(4) >= torch.tensor([4, 2, 0])[:, None]
    out, _ = theirs(x, x, x, key_padding_mask=padding)
    mine, _ = ours(x, x, x, key_padding_mask=padding)
    assert out[2].isnan().all() and mine[2].isfinite().all()
