"""data/korean_sample/: the Korean text the README's Korean walkthrough trains on, shipped
with the code (a fresh clone has no ../shared). Its SOURCE.md gives the source, the
licence and the checksum; a tiny model trains on it and samples from a Korean prompt."""

import hashlib
import re
import shutil
import subprocess
import unicodedata

import sample
from tests.conftest import ROOT, tiny_overrides
from training import load_config, train

SAMPLE = ROOT / "data" / "korean_sample" / "input.txt"
README_PROMPTS = ["새가 하늘을", "새가 하늘을 날았다", "다."]  # --prompt and --stop
PROMPTS = {"train.attention_prompt": "새가", "train.sample_prompt": "새가"}  # in its script


def test_the_sample_is_small_documented_and_tracked():
    raw = SAMPLE.read_bytes()
    text = raw.decode("utf-8")
    assert len(raw) <= 100_000 and unicodedata.is_normalized("NFC", text)
    source = (SAMPLE.parent / "SOURCE.md").read_text(encoding="utf-8")
    assert re.search(r"sha256: `([0-9a-f]{64})`", source)[1] == hashlib.sha256(raw).hexdigest()
    assert "CC BY-SA 4.0" in source and "KoCoNovel" in source and "public domain" in source
    assert f"bytes (UTF-8): {len(raw):,}" in source and f"points): {len(text):,}" in source
    for prompt in README_PROMPTS:
        assert set(prompt) <= set(text), prompt
    if shutil.which("git") and (ROOT / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", str(SAMPLE)], cwd=ROOT)
        assert ignored.returncode == 1, ".gitignore would leave the sample out of a clone"


def test_a_model_trained_on_the_sample_continues_a_korean_prompt(tmp_path, capsys):
    cfg = load_config(None, tiny_overrides(tmp_path, SAMPLE, **PROMPTS))
    result = train(cfg)
    assert result.best_val_loss < 7.0  # ln(1,011): below the uniform guess
    capsys.readouterr()
    argv = ["--out-dir", str(result.out_dir), "--device", "cpu", "--max-new-tokens", "5"]
    assert sample.main([*argv, "--prompt", README_PROMPTS[0]]) == 0
    out = capsys.readouterr().out
    assert out.startswith(README_PROMPTS[0]) and len(out) == len(README_PROMPTS[0]) + 5 + 1
