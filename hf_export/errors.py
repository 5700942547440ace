"""The one exception an export raises for bad input; its message names the fix."""


class ExportError(RuntimeError):
    """The run cannot be exported as asked (no matching architecture, the target
    folder holds other files, transformers is missing); one line naming the fix."""
