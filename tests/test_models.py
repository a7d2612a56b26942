import pytest
import torch

from labkit import models


def test_default_model_is_pretrained_two_layer_minilm(default_model):
    cfg = default_model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_labels) == (2, 384, 2)
    assert cfg.problem_type == "single_label_classification"
    # pretrained, not random: the word embeddings equal the checkpoint's
    from safetensors.torch import load_file

    ckpt = load_file(str(models.minilm_dir() / "model.safetensors"))
    key = next(k for k in ckpt if k.endswith("word_embeddings.weight"))
    assert torch.equal(default_model.bert.embeddings.word_embeddings.weight, ckpt[key].float())


def test_tokenizer_matches_bert_base_uncased_vocab():
    tok = models.load_tokenizer()
    assert tok.vocab_size == 30522
    assert tok("Hello world")["input_ids"] == [101, 7592, 2088, 102]


def test_bert_tiny_random_has_bert_tiny_shape():
    m = models.load_model("bert-tiny-random")
    assert models.count_parameters(m) == 4_386_178  # bert-tiny's 4.39M


def test_unknown_model_name_lists_allowed():
    with pytest.raises(KeyError, match="minilm-l2"):
        models.load_model("gpt-17")


def test_from_config_rejects_fake_fields_and_bad_heads():
    with pytest.raises(KeyError, match="not BertConfig fields"):
        models.from_config(num_layers=4)
    with pytest.raises(ValueError, match="divisible"):
        models.from_config(hidden_size=130, num_attention_heads=4)
    m = models.from_config(num_hidden_layers=3, hidden_size=96, num_attention_heads=4, intermediate_size=200)
    assert len(m.bert.encoder.layer) == 3 and m.config.intermediate_size == 200


def test_resnet18_parameter_count():
    model, source = models.resnet18()
    assert models.count_parameters(model) == 11_689_512, source
    assert model(torch.randn(1, 3, 64, 64)).shape == (1, 1000)
