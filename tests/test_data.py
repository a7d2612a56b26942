import hashlib

import pytest

from labkit import data, models, settings


def _content_sha(ds):
    """The README's writer-independent checksum: rows sorted by (label, id), tab-joined, sha256."""
    df = ds.to_pandas().sort_values(["label", "id"])
    text = "".join(f"{r.label}\t{r.id}\t{r.rating}\t{r.text}\n" for r in df.itertuples())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_imdb_offline_full_splits():
    dsd = data.load_imdb("offline")
    assert set(dsd) == {"train", "test"}
    for split in dsd.values():
        assert len(split) == 25_000
        assert split.column_names == ["text", "label"]
        counts = split.to_pandas()["label"].value_counts().to_dict()
        assert counts == {0: 12_500, 1: 12_500}
    assert dsd["train"].features["label"].names == ["neg", "pos"]


def test_parquet_content_matches_published_checksum():
    import datasets

    folder = data.find_imdb_dir()
    test = datasets.load_dataset("parquet", data_files=str(folder / "imdb_test.parquet"))["train"]
    assert _content_sha(test) == "3478e7227fbffa2cd744ffd44389f1d53ef42b38d03b7f3db6613a5f5bff4e4d"


def test_corrupt_file_is_rejected(tmp_path, monkeypatch):
    folder = data.find_imdb_dir()
    fake = tmp_path / "imdb"
    fake.mkdir()
    (fake / "imdb_test.parquet").write_bytes((folder / "imdb_test.parquet").read_bytes())
    (fake / "imdb_train.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="sha256"):
        data.verify_imdb_dir(fake)


def test_missing_data_error_says_where_and_how(tmp_path, monkeypatch):
    for var in settings.DATA_DIR_VARS:  # an explicit folder is used alone: unset them to test the search
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(settings, "data_dirs", lambda: [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(data.DataNotFoundError) as err:
        data.load_imdb("offline")
    msg = str(err.value)
    assert str(tmp_path / "a" / "imdb") in msg and str(tmp_path / "b" / "imdb") in msg
    assert "LABKIT_DATA_DIR" in msg


def test_unknown_source_is_an_error():
    with pytest.raises(ValueError, match="offline"):
        data.load_imdb("somewhere")


def test_stratified_seeded_subsets():
    a = data.imdb_splits(200, 100, seed=3)
    b = data.imdb_splits(200, 100, seed=3)
    c = data.imdb_splits(200, 100, seed=4)
    assert len(a["train"]) == 200 and len(a["test"]) == 100
    assert a["train"]["text"] == b["train"]["text"]
    assert a["train"]["text"] != c["train"]["text"]
    assert sum(a["train"]["label"]) == 100 and sum(a["test"]["label"]) == 50


def test_tokenize_truncates_and_batches_pad_dynamically():
    tok = models.load_tokenizer()
    enc = data.tokenize(data.imdb_splits(40, 8, seed=0), tok, max_length=32)
    lengths = [len(x) for x in enc["train"]["input_ids"]]
    assert max(lengths) == 32 and all(ids[0] == tok.cls_token_id for ids in enc["train"]["input_ids"])
    batch = next(iter(data.dataloader(enc["test"], tok, batch_size=8)))
    assert set(batch) >= {"input_ids", "attention_mask", "labels"}
    assert batch["input_ids"].shape[1] == max(len(x) for x in enc["test"]["input_ids"])
    # padding positions are exactly the masked-out ones
    assert ((batch["input_ids"] == tok.pad_token_id) == (batch["attention_mask"] == 0)).all()
