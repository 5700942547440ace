"""Reading a config's YAML: a key given twice is refused, and PyYAML's syntax errors
become one line, as compilers give them: ``file:line:col: what``.

PyYAML says ``in "<unicode string>", line 6, column 1`` over five lines, without the
file and without a hint; a tab in the indentation, the commonest slip in a hand-edited
config, reads "found character '\\t' that cannot start any token". And it keeps the
last of two equal keys without a word, so an edit further up a file can be undone by
an old line further down.
"""

from pathlib import Path

import yaml
from yaml.constructor import ConstructorError


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises ConstructorError on a key given twice in one
    mapping, marked at the second one."""

    def construct_mapping(self, node, deep=False):
        first: dict = {}  # key -> its node
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                earlier = first.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class says so
                break
            if earlier is not key_node:
                at = earlier.start_mark
                problem = (
                    f"key {key!r} is given twice (first at {at.line + 1}:{at.column + 1}); keep one"
                )
                raise ConstructorError(None, None, problem, key_node.start_mark)
        return super().construct_mapping(node, deep)


def load_yaml(text: str):
    """``yaml.safe_load(text)``, refusing a key given twice in one mapping.

    Raises:
        yaml.YAMLError: for a syntax error or a repeated key (see `describe_yaml_error`).
    """
    # A SafeLoader subclass: plain data only, no tags that construct objects or run code.
    return yaml.load(text, Loader=_UniqueKeyLoader)


def describe_yaml_error(path: str | Path, text: str, error: yaml.YAMLError) -> str:
    """One line naming ``path``, the 1-based line and column, and what is wrong.

    Args:
        path: the file that was parsed.
        text: its text (to see the character the error points at).
        error: what `load_yaml` (text) raised.

    Returns:
        e.g. ``configs/my.yaml:6:1: not valid YAML: a tab indents this line; indent
        with spaces``.
    """
    mark = getattr(error, "problem_mark", None)
    if mark is None:  # not a syntax error with a place (should not happen for text)
        return f"{path}: not valid YAML: {' '.join(str(error).split())}"
    where = f"{path}:{mark.line + 1}:{mark.column + 1}"
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    if mark.column < len(line) and line[mark.column] == "\t":
        if not line[: mark.column].strip():
            return f"{where}: not valid YAML: a tab indents this line; indent with spaces"
        return f"{where}: not valid YAML: a tab where YAML allows none; type a space instead"
    problem = error.problem or "syntax error"
    if problem.startswith("expected <block end>"):
        problem = "this line is indented to no level of the lines above it"
    context, start = error.context, getattr(error, "context_mark", None)
    if context and start is not None and (start.line, start.column) != (mark.line, mark.column):
        problem += f" ({context} begun at {start.line + 1}:{start.column + 1})"
    return f"{where}: not valid YAML: {problem}"
