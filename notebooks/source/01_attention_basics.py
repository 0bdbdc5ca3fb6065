# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] tags=["lang-en"]
# # Attention basics

# %% [markdown] tags=["lang-zh"] en_hash="899c419884"
# # 注意力基础

# %%
import math

import torch

from course_utils import check, setup

setup(lang="en")

# %% tags=["exercise"] exercise="01.scaled_dot"
def attention(query, key, value):
    ### BEGIN SOLUTION
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights
    ### END SOLUTION


# %%
check("01.scaled_dot", attention)
