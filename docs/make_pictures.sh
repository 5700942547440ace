#!/usr/bin/env bash
# Regenerates the pictures shipped in docs/ with the commands of the README and
# docs/attention_walkthrough.md. Every run and every file it makes goes under
# runs/docs_pictures/ (replaced on each call); only
# the finished pictures are copied into docs/.
#
#   bash docs/make_pictures.sh          # from the repository root; about 15 minutes on 2 cores
#
# docs/attention_layer0.png  explore_attention.py on a 600-step run of the CPU recipe
# docs/attention_page.png    the attention page in Korean in headless Chromium, on the
#                            Korean walkthrough model (data/korean_sample): the tables
# docs/attention_steps.png   its steps of layer 3, head 0, the weight of 먹 on 면 derived
# docs/attention_block.png   the rest of the block and what each head and MLP pushes
# docs/training_slider.png   the training-step slider at step 21
#                            (all four by dev/page_screenshots.py in a 1280 x 800 window;
#                            need chromium, chromium-driver, fonts-nanum and selenium;
#                            skipped without)
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/docs_pictures

python train.py --config configs/shakespeare_char_cpu.yaml train.max_iters=600 \
    train.lr_decay_iters=600 train.eval_interval=300 train.ema_decay=0 out_dir=$out/look_inside \
    train.overwrite=true
python explore_attention.py --out-dir $out/look_inside --prompt "To be, or not to be" \
    --layer 0 --head 3 --png-layers 0 --png $out/attention_layer0.png --dpi 80
cp $out/attention_layer0.png docs/attention_layer0.png

if python -c "import selenium" 2>/dev/null && command -v chromedriver >/dev/null; then
    python train.py --config configs/shakespeare_char_cpu.yaml \
        data.path=data/korean_sample/input.txt out_dir=$out/korean model.dropout=0.2 \
        train.max_iters=300 train.eval_interval=50 train.ema_start=200 train.overwrite=true \
        train.sample_prompt="새가 하늘을" train.attention_prompt="나는 라면을 먹었다"
    python dev/page_screenshots.py --out-dir $out/korean --docs $out
    for name in attention_page attention_steps attention_block training_slider; do
        cp $out/$name.png docs/$name.png
    done
else
    echo "skipped the page's pictures in docs/: needs selenium and chromedriver" >&2
fi
