#!/usr/bin/env bash
# Regenerates the pictures shipped in docs/ with the README's own commands. Every run
# and every file it makes goes under runs/docs_pictures/ (replaced on each call); only
# the finished pictures are copied into docs/.
#
#   bash docs/make_pictures.sh          # from the repository root; about 15 minutes on 2 cores
#
# docs/attention_layer0.png  explore_attention.py on a 600-step run of the CPU recipe
# docs/attention_page.png    the attention page in headless Chromium (needs chromium,
#                            chromium-driver, fonts-nanum and selenium; skipped without)
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/docs_pictures
korean=${KOREAN_CORPUS:-corpora/korean/input.txt}  # see docs/benchmarks.md#look-inside

python train.py --config configs/shakespeare_char_cpu.yaml train.max_iters=600 \
    train.lr_decay_iters=600 train.eval_interval=300 out_dir=$out/look_inside \
    train.overwrite=true
python explore_attention.py --out-dir $out/look_inside --prompt "To be, or not to be" \
    --layer 0 --head 3 --png-layers 0 --png $out/attention_layer0.png --dpi 80
cp $out/attention_layer0.png docs/attention_layer0.png

if python -c "import selenium" 2>/dev/null && command -v chromedriver >/dev/null; then
    python train.py --config configs/shakespeare_char_cpu.yaml data.path="$korean" \
        out_dir=$out/korean_small train.max_iters=600 train.lr_decay_iters=600 \
        train.eval_interval=300 train.compile=false train.sample_tokens=0 \
        train.attention_prompt= train.overwrite=true
    python bench/attention_page_browser.py --out-dir $out/korean_small \
        --prompt "새가 하늘을 날았다" --head 0 --row 4 --screenshot $out/attention_page.png
    cp $out/attention_page.png docs/attention_page.png
else
    echo "skipped docs/attention_page.png: needs selenium and chromedriver" >&2
fi
