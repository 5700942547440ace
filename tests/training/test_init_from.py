"""train.init_from: a new run from another run's weights, with a grown vocabulary, the
settings it must share refused when they differ, and its parent recorded."""

import pytest
import torch

import evaluate
import train as train_cli
from data.corpus import DEFAULT_CORPUS_PATH
from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from tests.conftest import KOREAN, ROOT, TEST_DEVICE, tiny_overrides
from training import load_config, train
from training.checkpoint import checkpoint_contents
from training.loop import Trainer

SHAKESPEARE = (ROOT / DEFAULT_CORPUS_PATH).read_text(encoding="utf-8")
# The parent's text has 58 distinct characters; the child's adds the 12 of these that
# it lacks (é ñ Æ Ø and eight Hangul syllables).
NEW_TEXT = "café señor 새가 하늘을 날았다 ÆØ "
ADDED = 12


@pytest.fixture
def corpora(tmp_path):
    """(the parent's text file, the child's: other English lines with new characters)."""
    parent = tmp_path / "parent.txt"
    parent.write_text(SHAKESPEARE[:20_000], encoding="utf-8")
    child = tmp_path / "child.txt"
    lines = SHAKESPEARE[20_000:32_000].splitlines(keepends=True)
    child.write_text("".join(line + NEW_TEXT * (i % 3 == 0) for i, line in enumerate(lines)))
    return parent, child


def make_parent(tmp_path, text_path, **model) -> tuple:
    """A parent run folder with a ckpt.pt of a fresh tiny model (its norms' gains and
    biases moved off 1 and 0, so that every weight matters), and its tokenizer."""
    overrides = tiny_overrides(tmp_path, text_path, out_dir=tmp_path / "parent", **model)
    cfg = load_config(None, overrides)
    text = text_path.read_text(encoding="utf-8")
    tokenizer = CharTokenizer.from_text(text, "nfc")
    cfg.model.vocab_size = tokenizer.vocab_size
    torch.manual_seed(0)
    parent = GPT(GPTConfig(**vars(cfg.model)))
    with torch.no_grad():
        for name, p in parent.named_parameters():
            if "norm" in name or "ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    (tmp_path / "parent").mkdir()
    contents = checkpoint_contents(parent, tokenizer, cfg, 100, 2.5)
    save_checkpoint(contents, tmp_path / "parent" / "ckpt.pt")
    return parent.eval(), tokenizer


def child_overrides(tmp_path, corpus, **extra) -> list[str]:
    """tiny_overrides without the model section (it comes from the parent), and
    without the TensorBoard views and the final whole-split score (time)."""
    quick = {"train.sample_tokens": 0, "train.attention_prompt": "", "train.final_full_eval": False}
    given = tiny_overrides(tmp_path, corpus, **{"out_dir": tmp_path / "child", **quick, **extra})
    model = {f"model.{k}" for k in ("n_layer", "n_head", "n_embd", "block_size")} - set(extra)
    return [o for o in given if o.split("=")[0] not in model] + [
        f"train.init_from={tmp_path / 'parent'}"
    ]


@pytest.mark.parametrize("position", ["learned", "rope"])
@pytest.mark.parametrize("tied", [True, False])
def test_before_the_first_step_old_characters_get_the_parents_logits(
    tmp_path, corpora, position, tied
):
    parent_text, child_text = corpora
    model = {"model.position": position, "model.tie_embeddings": tied}
    parent, parent_tok = make_parent(tmp_path, parent_text, **model)
    trainer = Trainer(load_config(None, child_overrides(tmp_path, child_text)))
    try:
        child, child_tok = trainer.model.eval(), trainer.corpus.tokenizer
        V = parent_tok.vocab_size
        # The parent's ids keep their meaning; the new characters follow.
        assert child_tok.chars[:V] == parent_tok.chars
        assert sorted(child_tok.chars[V:]) == sorted(set(NEW_TEXT) - set(parent_tok.chars))
        assert child.config.vocab_size == V + ADDED and child.config.position == position
        # The added rows start at the mean of the parent's rows.
        emb = child.token_embedding.weight.detach().cpu()
        old_mean = parent.token_embedding.weight.detach().mean(0)
        torch.testing.assert_close(emb[V:], old_mean.expand(ADDED, -1), rtol=0, atol=0)
        head = child.lm_head.weight.detach().cpu()
        assert (child.lm_head.weight is child.token_embedding.weight) == tied
        torch.testing.assert_close(
            head[V:], parent.lm_head.weight.detach().mean(0).expand(ADDED, -1), rtol=0, atol=0
        )
        prompt = "ROMEO:\nWhat say you, sir? Speak"
        ids = torch.tensor([parent_tok.encode(prompt).tolist()])
        with torch.no_grad():
            want, _ = parent(ids)
            got, _ = child.cpu()(torch.tensor([child_tok.encode(prompt).tolist()]))
        assert got.shape[-1] == V + ADDED
        torch.testing.assert_close(got[..., :V], want, rtol=0, atol=1e-6)
    finally:
        trainer.close(started=False)
    assert not (tmp_path / "child").exists()


def test_new_characters_train_and_the_run_records_its_parent(tmp_path, corpora, capsys):
    parent_text, child_text = corpora
    _, parent_tok = make_parent(tmp_path, parent_text)
    overrides = child_overrides(
        tmp_path, child_text, **{"train.max_iters": 30, "train.eval_interval": 30}
    )
    overrides += ["train.learning_rate=3e-3", "train.log_interval=10"]
    result = train(load_config(None, overrides))
    out = capsys.readouterr().out
    losses = result.losses
    assert losses[30] < losses[10] - 0.3, losses  # the new text is learned
    assert "vocabulary: its 58 characters + 12 new from this corpus (" in out
    assert "their rows started at the mean of its rows" in out
    assert "started from " in out and "(step 100, best validation loss 2.5000" in out
    ckpt = load_checkpoint(tmp_path / "child" / "ckpt.pt")
    # Old ids decode as before.
    model, tok = model_from_checkpoint(ckpt)
    assert tok.decode(range(58)) == "".join(parent_tok.chars)
    record = ckpt["parent"]
    assert record["path"] == str((tmp_path / "parent" / "ckpt.pt").resolve())
    assert (record["step"], record["best_val_loss"]) == (100, 2.5)
    assert record["data"]["path"] == str(parent_text)
    assert load_checkpoint(tmp_path / "child" / "best.pt")["parent"] == record
    assert ckpt["iter_num"] == 30 and ckpt["config"]["train"]["init_from"]
    config = (tmp_path / "child" / "config.yaml").read_text(encoding="utf-8")
    assert config.startswith(f"# Started from {record['path']} (train.init_from): step 100")
    # config.yaml holds the parent's model section, so it can be given again.
    again = load_config(tmp_path / "child" / "config.yaml")
    assert (again.model.n_embd, again.model.block_size) == (32, 32)


@pytest.mark.slow
def test_a_resumed_fine_tuning_run_matches_an_uninterrupted_one(tmp_path, corpora):
    parent_text, child_text = corpora
    make_parent(tmp_path, parent_text, **{"model.position": "rope"})
    common = {"model.dropout": 0.1, "train.lr_decay_iters": 8, "train.eval_interval": 4}
    full = train(
        load_config(None, child_overrides(tmp_path, child_text, **common, **{"train.max_iters": 8}))
    )
    split = tmp_path / "split"
    split.mkdir()
    (split / "parent").symlink_to(tmp_path / "parent")
    first = train(load_config(None, child_overrides(split, child_text, **common)))
    assert first.iter_num == 6
    resumed = {"train.max_iters": 8, "train.resume": True}
    second = train(load_config(None, child_overrides(split, child_text, **common, **resumed)))
    assert sorted(second.losses) == [7, 8]
    assert {**first.losses, **second.losses} == full.losses  # bitwise equal


def run_train(argv, capsys) -> tuple[int, str]:
    code = train_cli.main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            {"model.n_embd": 64},
            "train.init_from: model.n_embd=64 but the parent {parent}/ckpt.pt has "
            "model.n_embd=32: leave model.n_embd out, it comes from the checkpoint",
        ),
        (
            {"model.block_size": 48},
            "train.init_from: model.block_size=48 is larger than the parent "
            "{parent}/ckpt.pt's 32, and its learned position table has no trained rows "
            "past 32: use model.block_size<=32 (only a RoPE model may grow)",
        ),
        (
            {"data.normalization": "nfd"},
            "train.init_from: data.normalization=nfd but the parent {parent}/ckpt.pt "
            "reads nfc text: its ids mean characters in that form; set "
            "data.normalization=nfc",
        ),
    ],
)
def test_a_conflicting_setting_is_refused_in_one_line(tmp_path, corpora, capsys, extra, expected):
    parent_text, child_text = corpora
    make_parent(tmp_path, parent_text)
    code, err = run_train(child_overrides(tmp_path, child_text, **extra), capsys)
    assert code == 2
    assert err == "error: " + expected.format(parent=tmp_path / "parent") + "\n"
    assert not (tmp_path / "child").exists()


def test_a_rope_parent_may_grow_its_block_size_and_a_learned_one_shrink(tmp_path, corpora):
    parent_text, child_text = corpora
    make_parent(tmp_path, parent_text, **{"model.position": "rope"})
    grown = Trainer(
        load_config(None, child_overrides(tmp_path, child_text, **{"model.block_size": 64}))
    )
    grown.close(started=False)
    assert grown.model.config.block_size == 64
    (tmp_path / "parent" / "ckpt.pt").unlink()
    (tmp_path / "parent").rmdir()
    parent, tok = make_parent(tmp_path, parent_text)
    cut = Trainer(
        load_config(None, child_overrides(tmp_path, child_text, **{"model.block_size": 16}))
    )
    cut.close(started=False)
    table = cut.model.position_embedding.weight.detach().cpu()
    assert torch.equal(table, parent.position_embedding.weight.detach()[:16])


def test_a_missing_or_unreadable_parent_is_refused_in_one_line(tmp_path, corpora, capsys):
    _, child_text = corpora
    missing = child_overrides(tmp_path, child_text)
    code, err = run_train(missing, capsys)
    assert (code, err) == (
        2,
        f"error: train.init_from={tmp_path / 'parent'}: no such file or folder; name a "
        "run folder, or its ckpt.pt / best.pt\n",
    )
    (tmp_path / "parent").mkdir()
    (tmp_path / "parent" / "ckpt.pt").write_text("not a checkpoint")
    code, err = run_train(missing, capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: train.init_from: {tmp_path / 'parent' / 'ckpt.pt'} is not a")
    assert not (tmp_path / "child").exists()


def test_the_parents_own_folder_is_refused_as_out_dir(tmp_path, corpora, capsys):
    parent_text, child_text = corpora
    make_parent(tmp_path, parent_text)
    overrides = child_overrides(tmp_path, child_text, out_dir=tmp_path / "parent")
    code, err = run_train([*overrides, "train.overwrite=true"], capsys)
    assert code == 2 and "is the folder of train.init_from's checkpoint" in err
    assert (tmp_path / "parent" / "ckpt.pt").is_file()


def test_evaluate_scores_the_parents_text_for_both_models(tmp_path, corpora, capsys):
    parent_text, child_text = corpora
    make_parent(tmp_path, parent_text)
    overrides = child_overrides(tmp_path, child_text, **{"train.max_iters": 4})
    train(load_config(None, overrides))
    capsys.readouterr()
    argv = ["--out-dir", str(tmp_path / "child"), "--device", TEST_DEVICE.type]
    assert evaluate.main([*argv, "--parent-text"]) == 0
    out = capsys.readouterr().out
    child = evaluate.score_split(str(tmp_path / "child"), parent_text=True)
    parent = evaluate.score_split(str(tmp_path / "parent"))  # its own validation split
    assert child.characters == parent.characters == 2_000  # 10% of the parent's 20,000
    assert f"the parent's validation split, 2,000 characters: {child.loss:.4f} nats/char" in out
    change = child.loss - parent.loss
    assert f"on the same text: {parent.loss:.4f} nats/char; this run {child.loss:.4f} " in out
    assert f"({change:+.4f} nats/char" in out
    assert evaluate.main(["--out-dir", str(tmp_path / "parent"), "--parent-text"]) == 2
    assert "did not start from another run" in capsys.readouterr().err


def test_korean_sample_grows_a_shakespeare_vocabulary(tmp_path, corpora):
    parent_text, _ = corpora
    _, parent_tok = make_parent(tmp_path, parent_text)
    trainer = Trainer(load_config(None, child_overrides(tmp_path, KOREAN)))
    trainer.close(started=False)
    chars = trainer.corpus.tokenizer.chars
    korean = set(KOREAN.read_text(encoding="utf-8"))
    assert chars[:58] == parent_tok.chars and set(chars) == set(parent_tok.chars) | korean
    # Its splits are renumbered: they decode to the corpus's own text.
    assert (
        trainer.corpus.tokenizer.decode(trainer.corpus.train_ids[:200])
        == (KOREAN.read_text(encoding="utf-8")[:200])
    )


def test_a_grown_vocabulary_encodes_and_decodes_in_its_own_order():
    tok = CharTokenizer(["b", "c", "x", "a"], "nfc")  # a parent's b c x, then a new a
    assert tok.encode("abcx").tolist() == [3, 0, 1, 2]
    assert tok.decode([3, 0, 1, 2]) == "abcx"
    with pytest.raises(ValueError, match="must not repeat a character"):
        CharTokenizer(["a", "b", "a"])


def test_a_parent_stopped_before_its_first_evaluation_is_not_given_an_infinite_loss():
    """A parent interrupted before any evaluation keeps best_val_loss = inf; the start
    line and config.yaml said "best validation loss inf nats/char"."""
    from training.init_from import best_loss_words

    assert best_loss_words(float("inf")) == "not evaluated yet"
    assert best_loss_words(1.47991) == "best validation loss 1.4799 nats/char"
