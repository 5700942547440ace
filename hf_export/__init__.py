"""Export a trained run as a Hugging Face transformers folder (config.json,
model.safetensors, a character-level tokenizer.json) that loads with no code from this
project; `python export.py` is the command. transformers is imported only when exporting.
"""

from hf_export.errors import ExportError

__all__ = ["ExportError"]
