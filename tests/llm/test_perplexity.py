import math

import pytest
import torch
import torch.nn.functional as F

from _llm_tiny import tiny_llama
from labkit.llm import perplexity as P


def test_block_nll_is_the_models_own_loss_on_each_block(smollm2, imdb_blocks):
    """The independent reference: transformers' ``model(ids, labels=ids).loss`` (its own shift by one), one block
    at a time; ours runs the blocks batched. fp32: within 1e-5 relative."""
    model, _ = smollm2
    ours = P.block_nll(model, imdb_blocks, batch_size=3)
    with torch.no_grad():
        ref = torch.tensor([model(input_ids=b[None], labels=b[None]).loss.item() for b in imdb_blocks],
                           dtype=torch.float64)
    assert torch.allclose(ours, ref, rtol=1e-5, atol=0), (ours, ref)
    assert 2 < ours.mean().item() < 7  # a trained LM on English reviews (uniform over 49152 tokens: 10.8 nats)


def test_perplexity_is_exp_of_the_mean_over_every_predicted_token(random_blocks):
    model = tiny_llama()
    with torch.no_grad():
        logp = F.log_softmax(model(input_ids=random_blocks).logits[:, :-1].double(), dim=-1)
    token_nll = -logp.gather(-1, random_blocks[:, 1:, None]).squeeze(-1)  # (blocks, block_len - 1)
    p = P.perplexity(model, random_blocks, batch_size=3)
    assert p.tokens == token_nll.numel() == 4 * 31
    assert p.ppl == pytest.approx(math.exp(token_nll.mean().item()), rel=1e-6)
    assert p.per_block == pytest.approx(token_nll.mean(dim=1).tolist(), rel=1e-6)
    block = token_nll.mean(dim=1)
    assert p.nll_se == pytest.approx(block.std().item() / 2, rel=1e-6)  # sd over blocks / sqrt(4)
    assert p.ppl_se == pytest.approx(p.ppl * p.nll_se)  # the delta method


def test_from_block_nll_by_hand():
    p = P.from_block_nll([1.0, 2.0, 3.0], block_len=11)
    assert (p.nll, p.tokens) == (2.0, 30)
    assert p.ppl == pytest.approx(math.e ** 2) and p.nll_se == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(P.from_block_nll([1.0], 5).nll_se)


def test_paired_by_hand():
    d = P.paired([2.0, 3.0, 4.5], [1.0, 2.5, 3.0])  # differences 1, 0.5, 1.5
    assert d.mean == pytest.approx(1.0) and d.se == pytest.approx(0.5 / math.sqrt(3))
    assert d.ppl_ratio == pytest.approx(math.exp(3.1666666666666665 - 2.1666666666666665))
    ppl_a, ppl_b = math.exp(19 / 6), math.exp(13 / 6)
    lin = torch.tensor([ppl_a * a - ppl_b * b for a, b in ((2.0, 1.0), (3.0, 2.5), (4.5, 3.0))], dtype=torch.float64)
    assert d.ppl_diff == pytest.approx(ppl_a - ppl_b) and d.ppl_diff_se == pytest.approx(lin.std().item() / math.sqrt(3))
    with pytest.raises(ValueError, match="same blocks"):
        P.paired([1.0, 2.0], [1.0])


def test_compare_two_models_on_the_same_blocks(random_blocks):
    a, b = tiny_llama(0), tiny_llama(1)
    d = P.compare(a, b, random_blocks)
    pa, pb = P.perplexity(a, random_blocks), P.perplexity(b, random_blocks)
    assert d.ppl_ratio == pytest.approx(pa.ppl / pb.ppl) and d.ppl_diff == pytest.approx(pa.ppl - pb.ppl)
    same = P.compare(a, a, random_blocks)
    assert same.mean == 0 and same.se == 0


def test_text_blocks_are_seeded_review_starts(smollm2):
    tok = smollm2[1]
    a = P.text_blocks(tok, 3, 32, seed=0)
    assert a.shape == (3, 32) and a.dtype == torch.long
    assert torch.equal(a, P.text_blocks(tok, 3, 32, seed=0))
    assert not torch.equal(a, P.text_blocks(tok, 3, 32, seed=1))
    assert not torch.equal(a, P.text_blocks(tok, 3, 32, split="train", seed=0))
    assert "<br" not in tok.decode(P.text_blocks(tok, 8, 64).reshape(-1))  # HTML breaks are newlines


class _ShortTokenizer:
    """Every review is 3 tokens long."""

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [[1, 2, 3] for _ in texts]}


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(n_blocks=0, block_len=8), ValueError, "n_blocks=0: must be an int >= 1"),
    (dict(n_blocks=2, block_len=1), ValueError, "block_len=1: must be an int >= 2"),
    (dict(n_blocks=2, block_len=8, split="validation"), ValueError, "allowed values are train, test"),
])
def test_text_blocks_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        P.text_blocks(_ShortTokenizer(), **kwargs)


def test_too_few_long_reviews_says_how_many_there_are():
    with pytest.raises(ValueError, match=r"only 0 of the 25000 test reviews have >= 4 tokens"):
        P.text_blocks(_ShortTokenizer(), 1, 4)


def test_block_nll_bad_input():
    model = tiny_llama()
    with pytest.raises(TypeError, match="int64 tensor"):
        P.block_nll(model, torch.zeros(2, 8))
    with pytest.raises(ValueError, match=">= 2 tokens"):
        P.block_nll(model, torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="batch_size=0"):
        P.block_nll(model, torch.zeros(2, 8, dtype=torch.long), batch_size=0)


def test_logits_nll_is_the_models_loss_per_row_and_perplexity_takes_another(random_blocks):
    model = tiny_llama()
    with torch.no_grad():
        logits = model(input_ids=random_blocks).logits
        loss = [model(input_ids=b[None], labels=b[None]).loss.item() for b in random_blocks]
    nll = P.logits_nll(logits.bfloat16(), random_blocks)  # bf16 logits: the log-softmax still runs in float32
    assert nll.dtype == torch.float64 and nll.shape == (4,)
    assert torch.allclose(nll, P.logits_nll(logits.bfloat16().float(), random_blocks), rtol=0, atol=1e-12)
    assert P.logits_nll(logits, random_blocks).tolist() == pytest.approx(loss, rel=1e-5)
    seen = []
    ones = P.perplexity(model, random_blocks, 3, nll_fn=lambda lg, ids: seen.append(ids.shape) or torch.ones(len(ids)))
    assert ones.ppl == pytest.approx(math.e) and seen == [(3, 32), (1, 32)]  # the student's function, per batch
