"""`setting`: a config field with its rules beside it, what every section of a run
config is made of (`model.config.GPTConfig`, `data.settings.DataConfig`,
`training.settings.TrainConfig`). `training.config` checks the rules when a run
starts, and docs/configuration.md's table is generated from them.
"""

from dataclasses import field


def setting(
    default,
    doc: str,
    *,
    bounds: str | None = None,
    note: str | None = None,
    check=None,
    hyperparameter: bool = True,
    resume_may_change: bool = False,
):
    """A config field with its rules beside it, kept in ``field(metadata=...)``; the run
    config's validator and docs/configuration.md's table read them (`training.config`).

    Args:
        default: the value when nothing sets it.
        doc: what the key means (docs/configuration.md's table).
        bounds: the values allowed, as an interval (``"[0, 1)"``, ``"(0, 1]"``) or one
            bound (``"> 0"``, ``">= 0"``); null, where the type allows it, is never out.
        note: said in parentheses after the bounds when a value is out of them,
            e.g. ``"0 = off"``.
        check: a rule no bound states: a function of the value that returns the problem
            (the text after the key name) or None.
        hyperparameter: False for a setting of where or how to run, not of the
            experiment; it is left out of TensorBoard's HParams table.
        resume_may_change: True for a setting a resumed run may change without a note.
    """
    rules = {
        "doc": doc,
        "bounds": bounds,
        "note": note,
        "check": check,
        "hyperparameter": hyperparameter,
        "resume_may_change": resume_may_change,
    }
    return field(default=default, metadata=rules)
