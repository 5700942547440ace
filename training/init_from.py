"""Starting a run from another run's weights (train.init_from): fine-tuning.

    python train.py train.init_from=runs/shakespeare_char_cpu data.path=letters.txt \\
        out_dir=runs/letters

The new run (the child) takes the weights of the parent's checkpoint (its ckpt.pt, or a
ckpt.pt / best.pt named as a file), which are the weight average where the parent kept
one (train.ema_decay). Everything else starts afresh: optimizer state, learning-rate
schedule, step count, random streams, run folder and TensorBoard run. What it takes
from the parent:

- The model section: every setting that fixes the weights' shapes or meaning (n_layer,
  n_head, n_embd and the block's options). One given in the config file or on the
  command line that differs from the parent's is refused, naming both values.
  ``model.block_size`` may be smaller than the parent's (a learned position table keeps
  its first rows); larger only with RoPE, whose rotations are computed for any
  position: a learned table has no trained rows past the parent's block_size, and
  making some up would not be fine-tuning the parent. Dropout is the parent's unless given.
- ``data.normalization``: the parent's ids mean characters in its Unicode form, so a
  corpus in another form is refused with the setting to change.
- The vocabulary, grown (`grown_vocabulary`): the parent's characters keep their ids,
  the characters of the new corpus that the parent lacks are appended in code-point
  order, and the parent's characters the new corpus lacks are kept. The corpus's token
  ids are renumbered into that vocabulary (held in memory: 2 bytes a character). The
  new rows of the token embedding, and of the LM head where it is not tied, start at
  the mean of the parent's rows (`grown_weights`): a new character starts as the
  parent's "average character", and before the first step every prompt of old
  characters gets exactly the parent's logits for the old characters.

The child records its parent (`parent_record`) under the checkpoint's ``parent`` key:

    path           the parent's checkpoint file, absolute
    step           its iter_num
    best_val_loss  its best validation loss, nats/char
    data           its data section, so ``evaluate.py --parent-text`` can score its
                   validation text
    corpus         its corpus record (training.checkpoint; None where the file has none)
    parent         the parent's own parent record, for a chain (absent otherwise)

and says it in the start line, config.yaml (a comment at its top) and TensorBoard's
HParams (parent.*). A resumed child (train.resume=true, the same command) takes its
settings and vocabulary from its own checkpoint, exactly as any resumed run.
"""

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from data.corpus import Corpus
from data.sources import shown
from data.tokenizer import CharTokenizer, list_characters
from model import GPT, GPTConfig
from model.checkpoint import (
    BEST_NAME,
    CKPT_NAME,
    CheckpointError,
    load_checkpoint,
    strip_compiled_prefix,
)
from training.checkpoint import ARCHITECTURE_KEYS, CORPUS_KEY
from training.config import ConfigError, RunConfig, flatten

PARENT_KEY = "parent"  # the checkpoint's entry
ADDED_SHOWN = 12  # new characters the start line shows


def given_keys(cfg: RunConfig) -> frozenset[str]:
    """The dotted keys the config file and the command line set (`load_config` keeps
    them as ``cfg.given_keys``); for a RunConfig built otherwise, the keys whose value
    is not the default."""
    given = getattr(cfg, "given_keys", None)
    if given is not None:
        return given
    defaults = flatten(RunConfig().to_dict())
    return frozenset(k for k, v in flatten(cfg.to_dict()).items() if defaults.get(k) != v)


def parent_checkpoint_path(init_from: str) -> Path:
    """The file train.init_from names: a run folder's ckpt.pt, or the file itself.

    Raises:
        CheckpointError: one line naming train.init_from, for a path that is neither.
    """
    path = Path(init_from)
    if path.is_dir():
        if (path / CKPT_NAME).is_file():
            return path / CKPT_NAME
        raise CheckpointError(
            f"train.init_from={init_from}: the folder holds no {CKPT_NAME}; name a run "
            f"folder with a checkpoint, or a {CKPT_NAME} / {BEST_NAME} file"
        )
    if not path.is_file():
        raise CheckpointError(
            f"train.init_from={init_from}: no such file or folder; name a run folder, or "
            f"its {CKPT_NAME} / {BEST_NAME}"
        )
    return path


def parent_record(ckpt: dict, path: Path) -> dict:
    """The child's ``parent`` entry for the parent checkpoint ``ckpt`` read from
    ``path`` (see the module docstring). A best.pt holds no corpus record: the one of
    the ckpt.pt beside it is taken, where there is one."""
    corpus = ckpt.get(CORPUS_KEY)
    beside = path.with_name(CKPT_NAME)
    if corpus is None and path.name != CKPT_NAME and beside.is_file():
        try:
            corpus = load_checkpoint(beside).get(CORPUS_KEY)
        except CheckpointError:
            corpus = None
    record = {
        "path": str(path.resolve()),
        "step": int(ckpt["iter_num"]),
        "best_val_loss": float(ckpt["best_val_loss"]),
        "data": dict(ckpt["config"].get("data", {})),
        "corpus": corpus,
    }
    if PARENT_KEY in ckpt:
        record["parent"] = ckpt[PARENT_KEY]
    return record


def adopt_settings(cfg: RunConfig, ckpt: dict, name: str) -> RunConfig:
    """``cfg`` with the model section and data.normalization of ``ckpt`` (see the
    module docstring), vocab_size 0 (set from the grown vocabulary).

    Args:
        cfg: the run's config as loaded (not changed).
        ckpt: the parent's checkpoint, or the child's own on resume.
        name: how messages name ``ckpt``.

    Raises:
        ConfigError: listing every given setting that conflicts with ``ckpt``'s, each
            naming both values (one line for one conflict).
    """
    cfg, given = copy.deepcopy(cfg), given_keys(cfg)
    saved = {**dataclasses.asdict(GPTConfig()), **ckpt["model_config"]}
    problems = []
    for key in ARCHITECTURE_KEYS:
        mine = getattr(cfg.model, key)
        if f"model.{key}" not in given:
            setattr(cfg.model, key, saved[key])
        elif key == "block_size":
            if mine > saved[key] and saved["position"] == "learned":
                problems.append(
                    f"model.block_size={mine} is larger than {name}'s {saved[key]}, and its "
                    f"learned position table has no trained rows past {saved[key]}: use "
                    f"model.block_size<={saved[key]} (only a RoPE model may grow)"
                )
        elif mine != saved[key]:
            problems.append(
                f"model.{key}={mine} but {name} has model.{key}={saved[key]}: leave "
                f"model.{key} out, it comes from the checkpoint"
            )
    if "model.dropout" not in given:
        cfg.model.dropout = saved["dropout"]
    cfg.model.vocab_size = 0
    normalization = ckpt.get("normalization", "none")
    if "data.normalization" not in given:
        cfg.data.normalization = normalization
    elif cfg.data.normalization != normalization:
        problems.append(
            f"data.normalization={cfg.data.normalization} but {name} reads "
            f"{normalization} text: its ids mean characters in that form; set "
            f"data.normalization={normalization}"
        )
    if len(problems) == 1:
        raise ConfigError(f"train.init_from: {problems[0]}")
    if problems:
        raise ConfigError("train.init_from:\n  - " + "\n  - ".join(problems))
    return cfg


def best_loss_words(loss: float) -> str:
    """How the parent's best validation loss reads: "best validation loss 1.4799
    nats/char", or "not evaluated yet" for a parent stopped before its first evaluation
    (whose best is still infinite)."""
    if math.isfinite(loss):
        return f"best validation loss {loss:.4f} nats/char"
    return "not evaluated yet"


@dataclass
class Parent:
    """The run a child starts from, as the trainer uses it.

    Attributes:
        record: the checkpoint's ``parent`` entry (see the module docstring).
        vocab: the parent's characters in id order (on resume: the child's own).
        ckpt: the parent's checkpoint, whose weights a new child takes; None on resume.
        added: the characters the corpus added (set by `renumber`).
        unused: how many of ``vocab``'s characters the corpus lacks (likewise).
    """

    record: dict
    vocab: list[str]
    ckpt: dict | None = None
    added: list[str] = field(default_factory=list)
    unused: int = 0

    def renumber(self, corpus: Corpus) -> Corpus:
        """``corpus`` with the grown vocabulary (`grown_vocabulary`), its splits' token
        ids renumbered into it; the same corpus when its vocabulary already is that."""
        chars = corpus.tokenizer.chars
        grown, self.added = grown_vocabulary(self.vocab, chars)
        self.unused = len(set(self.vocab) - set(chars))
        if grown == chars:
            return corpus
        tokenizer = CharTokenizer(grown, corpus.tokenizer.normalization)
        table = corpus.tokenizer.ids_in(tokenizer).astype(tokenizer.dtype)  # old id -> new

        def renumbered(ids):
            return table[ids]  # reads the split once; (N,) in memory

        return dataclasses.replace(
            corpus,
            tokenizer=tokenizer,
            train_ids=renumbered(corpus.train_ids),
            val_ids=renumbered(corpus.val_ids),
            test_ids=renumbered(corpus.test_ids),
        )

    def load_weights(self, model: GPT) -> None:
        """Give the new ``model`` the parent's weights, grown and cut to its config
        (`grown_weights`)."""
        state = grown_weights(strip_compiled_prefix(self.ckpt["model"]), model.config)
        model.load_state_dict(state)

    def start_line(self, model_config: GPTConfig) -> str:
        """What the run says of its parent at the start: the checkpoint, its step,
        loss and corpus, and for a new child what it took and what it added."""
        r = self.record
        line = (
            f"started from {shown(Path(r['path']))} (step {r['step']:,}, "
            f"{best_loss_words(r['best_val_loss'])}, trained on {r['data'].get('path', '?')})"
        )
        if self.ckpt is None:
            return f"note: this run {line}"
        weights = "its weight average" if "average" in self.ckpt else "its weights"
        parts = [f"{weights}; a new optimizer, schedule and step count"]
        old_block = self.ckpt["model_config"]["block_size"]
        if model_config.block_size != old_block:
            how = (
                f"the first {model_config.block_size} rows of its position table"
                if model_config.position == "learned"
                else "rotary positions"
            )
            parts.append(f"model.block_size {old_block} -> {model_config.block_size} ({how})")
        vocab = f"vocabulary: its {len(self.vocab):,} characters"
        if self.added:
            vocab += (
                f" + {len(self.added):,} new from this corpus ("
                f"{list_characters(self.added, ADDED_SHOWN)}), their rows started at the "
                "mean of its rows"
            )
        if self.unused:
            vocab += f"; {self.unused:,} of its characters are not in this corpus (kept)"
        return f"fine-tuning: {line}: " + "; ".join([*parts, vocab])

    def config_comment(self) -> str:
        """config.yaml's first lines: the parent, as YAML comments."""
        r = self.record
        files = (r.get("corpus") or {}).get("files") or []
        lines = [
            f"Started from {r['path']} (train.init_from): step {r['step']}, "
            f"{best_loss_words(r['best_val_loss'])},",
            f"trained on data.path={r['data'].get('path', '?')}"
            + "".join(f"\n  {name}: {size} bytes, sha256 {sha}" for name, size, sha in files),
        ]
        return "".join(f"# {line}\n" for line in "\n".join(lines).splitlines())

    def hparams(self) -> dict:
        """TensorBoard's HParams entries of the parent, as a ``parent`` section."""
        r = self.record
        path = r["data"].get("path", "")
        loss = r["best_val_loss"]
        return {
            "parent": {
                "path": r["path"],
                "step": r["step"],
                "best_val_loss": loss,
                "data_path": path,
            }
        }


def grown_vocabulary(parent: list[str], corpus: list[str]) -> tuple[list[str], list[str]]:
    """The child's vocabulary: the ``parent``'s characters in their id order, then the
    ``corpus``'s characters that the parent lacks, in the corpus's (code-point) order.

    Returns:
        (the vocabulary, the characters added).
    """
    known = set(parent)
    added = [c for c in corpus if c not in known]
    return list(parent) + added, added


def grown_weights(state: dict, config: GPTConfig) -> dict:
    """The parent's ``state`` (its state_dict) fitted to a model of ``config``.

    | tensor                      | child's value                                    |
    |-----------------------------|--------------------------------------------------|
    | token_embedding.weight      | the parent's (V, C) rows, then vocab_size - V    |
    |                             | rows each the mean of the parent's rows          |
    | lm_head.weight, untied      | likewise, with the mean of the head's rows       |
    | lm_head.weight, tied        | the grown token embedding (the same tensor)      |
    | position_embedding.weight   | the first block_size rows (learned positions)    |
    | everything else             | the parent's                                     |

    Returns:
        A state_dict for ``GPT(config)``.
    """
    state = dict(state)

    def grown(rows: torch.Tensor) -> torch.Tensor:  # (V, C) -> (vocab_size, C)
        extra = config.vocab_size - rows.size(0)
        mean = rows.mean(dim=0, keepdim=True)  # (1, C)
        return torch.cat([rows, mean.expand(extra, -1)]) if extra else rows

    embedding = grown(state["token_embedding.weight"])
    state["token_embedding.weight"] = embedding
    if config.tie_embeddings:
        state["lm_head.weight"] = embedding
    else:
        state["lm_head.weight"] = grown(state["lm_head.weight"])
    if "position_embedding.weight" in state:
        state["position_embedding.weight"] = state["position_embedding.weight"][: config.block_size]
    return state


def start_from_parent(cfg: RunConfig) -> tuple[RunConfig, Parent | None]:
    """For train.init_from: the run's config with the settings taken from the parent
    (`adopt_settings`), and the `Parent`; ``(cfg, None)`` without train.init_from.

    A new run reads the parent's checkpoint; a resumed one (train.resume with a
    ckpt.pt in out_dir) its own, whose ``parent`` record it carries on. Runs before the
    run folder is made, so a refusal leaves nothing behind.

    Raises:
        ConfigError: conflicting settings; out_dir is the parent's own folder; a
            resumed run that did not start from a parent.
        CheckpointError: the path holds no checkpoint (one line naming train.init_from).
    """
    init_from = cfg.train.init_from
    if not init_from:
        return cfg, None
    own = Path(cfg.out_dir) / CKPT_NAME
    if cfg.train.resume:
        if not own.is_file():
            return cfg, None  # the run folder says there is nothing to resume
        ckpt = load_checkpoint(own)
        if PARENT_KEY not in ckpt:
            raise ConfigError(
                f"train.init_from={init_from}, but the run in {shown(cfg.out_dir)} did not "
                "start from another run: resume it without train.init_from"
            )
        adopted = adopt_settings(cfg, ckpt, f"the run's checkpoint {shown(own)}")
        return adopted, Parent(ckpt[PARENT_KEY], list(ckpt["vocab"]))
    path = parent_checkpoint_path(init_from)
    if Path(cfg.out_dir).resolve() == path.parent.resolve():
        raise ConfigError(
            f"out_dir={shown(cfg.out_dir)} is the folder of train.init_from's checkpoint: "
            f"give the new run its own, e.g. out_dir={shown(cfg.out_dir)}_finetuned"
        )
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        raise CheckpointError(f"train.init_from: {e}") from None
    adopted = adopt_settings(cfg, ckpt, f"the parent {shown(path)}")
    return adopted, Parent(parent_record(ckpt, path), list(ckpt["vocab"]), ckpt)
