"""PyYAML's syntax errors as one line, as compilers give them: ``file:line:col: what``.

PyYAML says ``in "<unicode string>", line 6, column 1`` over five lines, without the
file and without a hint; a tab in the indentation, the commonest slip in a hand-edited
config, reads "found character '\\t' that cannot start any token".
"""

from pathlib import Path

import yaml


def describe_yaml_error(path: str | Path, text: str, error: yaml.YAMLError) -> str:
    """One line naming ``path``, the 1-based line and column, and what is wrong.

    Args:
        path: the file that was parsed.
        text: its text (to see the character the error points at).
        error: what ``yaml.safe_load(text)`` raised.

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
