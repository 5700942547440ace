"""A config file with a YAML syntax error or a key given twice gets one line,
file:line:col and what is wrong (a tab: "indent with spaces"), instead of PyYAML's
five lines about "<unicode string>" (or, for a repeated key, silence)."""

import pytest

from training.config import ConfigError, load_config

CASES = [
    # (text, line:col, what the line says)
    ("model:\n  n_layer: 4\n\tn_head: 2\n", "3:1", "a tab indents this line; indent with spaces"),
    ("model:\n\tn_layer: 4\n", "2:1", "a tab indents this line; indent with spaces"),
    ("model:\n  n_layer:\t4\n", "2:11", "a tab where YAML allows none; type a space instead"),
    ("model: [1, 2\n", "2:1", "expected ',' or ']'"),
    ("train:\n  sample_prompt: a: b\n", "2:19", "mapping values are not allowed here"),
    ("model:\n  n_layer: 4\n n_head: 2\n", "3:2", "indented to no level of the lines above"),
    ("train:\n  sample_prompt: 'it''s\n", "3:1", "quoted scalar begun at 2:18"),
    # PyYAML keeps the last of two equal keys; a config refuses them.
    (
        "train:\n  learning_rate: 1.0e-3\n  batch_size: 8\n  learning_rate: 2.0e-3\n",
        "4:3",
        "key 'learning_rate' is given twice (first at 2:3); keep one",
    ),
    ("model:\n  n_layer: 2\ntrain:\n  max_iters: 5\nmodel:\n  n_head: 2\n", "5:1", "'model'"),
]


@pytest.mark.parametrize(("text", "place", "what"), CASES)
def test_a_yaml_syntax_error_is_one_line_naming_file_line_and_column(tmp_path, text, place, what):
    path = tmp_path / "my.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert message.startswith(f"{path}:{place}: not valid YAML: ")
    assert what in message
    assert "\n" not in message and "<unicode string>" not in message
