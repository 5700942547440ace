import math

import pytest
import torch

from model import GPT, GPTConfig


def tiny_config(**kw):
    base = dict(vocab_size=65, block_size=32, n_layer=2, n_head=2, n_embd=32)
    base.update(kw)
    return GPTConfig(**base)


def test_forward_shapes_and_loss_units():
    model = GPT(tiny_config())
    idx = torch.randint(0, 65, (3, 32))
    logits, loss = model(idx)
    assert logits.shape == (3, 32, 65) and loss is None
    logits, loss = model(idx, torch.randint(0, 65, (3, 32)))
    assert loss.dim() == 0


def test_initial_loss_is_close_to_uniform():
    torch.manual_seed(0)
    model = GPT(tiny_config(n_layer=4, n_embd=64, n_head=4))
    model.eval()
    x = torch.randint(0, 65, (16, 32))
    y = torch.randint(0, 65, (16, 32))
    _, loss = model(x, y)
    assert abs(loss.item() - math.log(65)) < 0.1


def test_initialisation_follows_gpt2():
    torch.manual_seed(0)
    cfg = tiny_config(n_layer=4, n_embd=128, n_head=4)
    model = GPT(cfg)
    assert model.lm_head.weight is model.token_embedding.weight
    std = model.blocks[0].attn.qkv_proj.weight.std().item()
    assert abs(std - 0.02) < 0.002
    residual = model.blocks[0].mlp.down_proj.weight.std().item()
    assert abs(residual - 0.02 / math.sqrt(2 * cfg.n_layer)) < 0.001


def test_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(tiny_config(block_size=16))
    x = torch.randint(0, 65, (4, 16))
    y = torch.randint(0, 65, (4, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1  # started near ln(65) = 4.17


def test_too_long_input_is_rejected():
    model = GPT(tiny_config(block_size=8))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_generate_crops_context_and_is_seeded():
    torch.manual_seed(0)
    model = GPT(tiny_config(block_size=8)).eval()
    idx = torch.zeros(2, 3, dtype=torch.long)
    a = model.generate(idx, 20, generator=torch.Generator().manual_seed(5))
    b = model.generate(idx, 20, generator=torch.Generator().manual_seed(5))
    assert a.shape == (2, 23) and torch.equal(a, b)
    assert torch.equal(a[:, :3], idx)
    greedy = model.generate(idx, 5, temperature=0)
    assert torch.equal(greedy, model.generate(idx, 5, temperature=0))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -1}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"max_new_tokens": -1}, "max_new_tokens"),
    ],
)
def test_generate_rejects_bad_arguments(kwargs, message):
    model = GPT(tiny_config()).eval()
    args = {"max_new_tokens": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        model.generate(torch.zeros(1, 1, dtype=torch.long), **args)


def test_top_k_larger_than_vocabulary_is_clamped():
    model = GPT(tiny_config()).eval()
    out = model.generate(torch.zeros(1, 1, dtype=torch.long), 4, top_k=1000)
    assert out.shape == (1, 5)


# The state_dict keys of checkpoints written before the network moved into one file
# (main at 434c35f), for a learned-position model with biases (GPT-2's layout).
KEYS_BEFORE_ONE_FILE = (
    ["token_embedding.weight", "position_embedding.weight"]
    + [
        f"blocks.{i}.{name}"
        for i in range(2)
        for name in (
            "ln_1.weight",
            "ln_1.bias",
            "attn.qkv_proj.weight",
            "attn.qkv_proj.bias",
            "attn.out_proj.weight",
            "attn.out_proj.bias",
            "ln_2.weight",
            "ln_2.bias",
            "mlp.up_proj.weight",
            "mlp.up_proj.bias",
            "mlp.down_proj.weight",
            "mlp.down_proj.bias",
        )
    ]
    + ["ln_f.weight", "ln_f.bias", "lm_head.weight"]
)


def test_a_state_dict_with_the_keys_of_older_checkpoints_loads():
    """Checkpoints saved before the change still load (strict), with their values."""
    model = GPT(tiny_config())
    assert list(model.state_dict()) == KEYS_BEFORE_ONE_FILE
    torch.manual_seed(1)
    old = {key: torch.randn_like(value) for key, value in model.state_dict().items()}
    old["lm_head.weight"] = old["token_embedding.weight"]  # tied, as saved
    fresh = GPT(tiny_config())
    fresh.load_state_dict(old, strict=True)
    assert torch.equal(fresh.blocks[1].mlp.down_proj.bias, old["blocks.1.mlp.down_proj.bias"])
    assert fresh.lm_head.weight is fresh.token_embedding.weight
    rope = GPT(tiny_config(position="rope", norm="rmsnorm", bias=False)).state_dict()
    assert "position_embedding.weight" not in rope and "blocks.0.attn.rotary.cos" not in rope
