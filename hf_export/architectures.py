"""Which transformers architecture computes exactly our model's function, its config,
and our checkpoint's weights renamed (and transposed) for it.

| our model_config                                    | transformers class  |
|-----------------------------------------------------|---------------------|
| position learned, layernorm, gelu, no qk_norm       | GPT2LMHeadModel     |
| position rope, rmsnorm, relu2, qk_norm, bias false  | Qwen3ForCausalLM    |
| position rope, rmsnorm, relu2, no qk_norm           | LlamaForCausalLM    |

Past block_size characters, our sampler slides (learned positions) or rolls (RoPE)
its window of context. Qwen3 does the same as our rolling KV cache (sliding-window
attention over the last block_size keys, positions going on), so its generations
agree however long (its max_position_embeddings is Qwen3's default, 32768, not
block_size, so transformers does not warn past block_size); GPT-2 has no position
past block_size (transformers raises an IndexError), and Llama attends over
everything (its text differs past block_size). `Architecture.length_note` says which,
in the export's own output.

All three need logit_softcap 0; bias, tie_embeddings, sizes and rope_base may be
anything (zero_init_proj and dropout only matter in training). Why each is exact:

- GPT-2: the same pre-norm block. GELU is ``activation_function="gelu"`` (the exact
  erf form, as ``nn.GELU()``; GPT-2's own default ``gelu_new`` is the tanh
  approximation), LayerNorm eps 1e-5 as ``nn.LayerNorm``, scores scaled by
  1/sqrt(d_k). Its ``Conv1D`` layers store weights as (in, out), the transpose of
  ``nn.Linear``; GPT-2 always has biases, so a run without them exports zeros.
- Qwen3 and Llama: RMSNorm with a gain, RoPE in the half-split layout
  (``rotate_half``, as `model.gpt.rotate`), per-head RMS QK-norm (Qwen3: with a gain, exported
  as ones). Their eps is one config value for every norm: ours is PyTorch's default,
  ``torch.finfo(float32).eps``. Their MLP is gated, down(act(gate(x)) * up(x)); with
  act = ReLU and gate = up = our up_proj it is down(relu(z) * z) = down(relu(z)²),
  our ReLU² MLP exactly, at the price of a second copy of the up-projection (a third
  more weights per block). Qwen3's MLP has no biases, so it takes bias-free runs only.
- Llama has no QK-norm, Qwen3 has no switch to turn it off; Olmo2 normalises q and k
  over all heads at once, not per head; Nemotron's MLP is ReLU² without a gate, but its
  norms are LayerNorm (mean subtracted, gain + 1), not RMSNorm. None of them has a
  logit soft-cap, and no class computes GELU with RoPE or RMSNorm with learned
  positions without a gate: those runs are refused.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from hf_export.errors import ExportError

# What GPTConfig gave a key that a model_config from an older run lacks.
DEFAULTS = {
    "bias": True,
    "position": "learned",
    "rope_base": 10000.0,
    "norm": "layernorm",
    "qk_norm": False,
    "activation": "gelu",
    "tie_embeddings": True,
    "logit_softcap": 0.0,
}
# nn.RMSNorm(eps=None) and F.rms_norm(eps=None) use the input dtype's machine epsilon.
RMS_NORM_EPS = torch.finfo(torch.float32).eps
LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default
QWEN3_MAX_POSITIONS = 32768  # Qwen3Config's default; see _qwen3_config


@dataclass(frozen=True)
class Architecture:
    """A transformers class that computes the same function as our model when the
    model_config has the ``needs`` values.

    Attributes:
        class_name: the transformers model class (``AutoModelForCausalLM`` loads it).
        config_class: its config class.
        needs: model_config key -> the value this class requires.
        config: model_config -> keyword arguments of ``config_class``.
        weights: (model_config, our state_dict) -> the class's state_dict.
        past_block_size: what its generate does past block_size characters: "slides"
            (as sample.py), "differs" (attends over everything) or "stops" (no
            position there).
    """

    class_name: str
    config_class: str
    needs: dict
    config: Callable[[dict], dict]
    weights: Callable[[dict, dict], dict]
    past_block_size: str

    def length_note(self, block_size: int) -> str:
        """How long a text the exported model generates as ours does, and how to stay
        within it: a line for the export's output."""
        if self.past_block_size == "slides":
            return (
                f"{self.class_name} slides past block_size {block_size} as sample.py does: "
                "generate any length"
            )
        why = {
            "stops": "has no position past",
            "differs": "attends over everything past (unlike sample.py)",
        }[self.past_block_size]
        return (
            f"{self.class_name} {why} block_size {block_size}: generate at most {block_size} "
            f"characters, prompt included (generate(ids, max_length={block_size}))"
        )

    def differences(self, model_config: dict) -> list[str]:
        """'model.key=value (this run: other)' for each requirement the run misses."""
        return [
            f"model.{key}={_yaml(value)} (this run: {_yaml(setting(model_config, key))})"
            for key, value in self.needs.items()
            if setting(model_config, key) != value
        ]

    def missing_settings(self, model_config: dict) -> list[str]:
        """'model.key=value', the override, for each requirement the run misses."""
        return [
            f"model.{key}={_yaml(value)}"
            for key, value in self.needs.items()
            if setting(model_config, key) != value
        ]

    @property
    def short_name(self) -> str:
        """gpt2, qwen3, llama: the config class's name without "Config", lowercased."""
        return self.config_class.removesuffix("Config").lower()


def setting(model_config: dict, key: str):
    """model_config[key], or what GPTConfig gave it before the key existed."""
    return model_config.get(key, DEFAULTS.get(key))


def _yaml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _no_token_ids() -> dict:
    # No BOS/EOS: a character vocabulary has no such tokens. No pad id either: the
    # tokenizer pads with a real character (hf_export/tokenizer.py), and generate()
    # given a pad id but no attention mask would mask that character everywhere.
    return {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def _gpt2_config(mc: dict) -> dict:
    return {
        "vocab_size": mc["vocab_size"],
        "n_positions": mc["block_size"],
        "n_embd": mc["n_embd"],
        "n_layer": mc["n_layer"],
        "n_head": mc["n_head"],
        "n_inner": 4 * mc["n_embd"],
        "activation_function": "gelu",
        "layer_norm_epsilon": LAYER_NORM_EPS,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": setting(mc, "tie_embeddings"),
        **_no_token_ids(),
    }


def _bias(sd: dict, key: str, weight: torch.Tensor) -> torch.Tensor:
    """Our bias, or zeros of the layer's output size for a run without biases."""
    return sd[key] if key in sd else weight.new_zeros(weight.shape[0])


def _gpt2_weights(mc: dict, sd: dict) -> dict:
    out = {
        "transformer.wte.weight": sd["token_embedding.weight"],
        "transformer.wpe.weight": sd["position_embedding.weight"],
        "transformer.ln_f.weight": sd["ln_f.weight"],
        "transformer.ln_f.bias": _bias(sd, "ln_f.bias", sd["ln_f.weight"]),
    }
    ours_to_conv1d = {"attn.qkv_proj": "attn.c_attn", "attn.out_proj": "attn.c_proj"}
    ours_to_conv1d |= {"mlp.up_proj": "mlp.c_fc", "mlp.down_proj": "mlp.c_proj"}
    for i in range(mc["n_layer"]):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        for norm in ("ln_1", "ln_2"):
            weight = sd[f"{ours}{norm}.weight"]
            out[f"{theirs}{norm}.weight"] = weight
            out[f"{theirs}{norm}.bias"] = _bias(sd, f"{ours}{norm}.bias", weight)
        for name, conv in ours_to_conv1d.items():
            weight = sd[f"{ours}{name}.weight"]  # (out, in), as nn.Linear
            out[f"{theirs}{conv}.weight"] = weight.t().contiguous()  # Conv1D: (in, out)
            out[f"{theirs}{conv}.bias"] = _bias(sd, f"{ours}{name}.bias", weight)
    if not setting(mc, "tie_embeddings"):
        out["lm_head.weight"] = sd["lm_head.weight"]
    return out


def _rope_config(mc: dict) -> dict:
    bias = setting(mc, "bias")
    return {
        "vocab_size": mc["vocab_size"],
        "hidden_size": mc["n_embd"],
        "intermediate_size": 4 * mc["n_embd"],
        "num_hidden_layers": mc["n_layer"],
        "num_attention_heads": mc["n_head"],
        "num_key_value_heads": mc["n_head"],
        "head_dim": mc["n_embd"] // mc["n_head"],
        "hidden_act": "relu",  # relu(gate) * up with gate = up: ReLU², see the docstring
        "max_position_embeddings": mc["block_size"],  # Qwen3: see _qwen3_config
        "rms_norm_eps": RMS_NORM_EPS,
        "rope_parameters": {"rope_type": "default", "rope_theta": setting(mc, "rope_base")},
        "attention_bias": bias,
        "mlp_bias": bias,  # Llama only; Qwen3 requires bias false
        "attention_dropout": 0.0,
        "tie_word_embeddings": setting(mc, "tie_embeddings"),
        **_no_token_ids(),
    }


def _rope_weights(mc: dict, sd: dict, qk_norm: bool) -> dict:
    head_size = mc["n_embd"] // mc["n_head"]
    out = {"model.embed_tokens.weight": sd["token_embedding.weight"]}
    out["model.norm.weight"] = sd["ln_f.weight"]
    for i in range(mc["n_layer"]):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        out[f"{theirs}input_layernorm.weight"] = sd[f"{ours}ln_1.weight"]
        out[f"{theirs}post_attention_layernorm.weight"] = sd[f"{ours}ln_2.weight"]
        # qkv_proj's rows are q, k, v in turn, each n_embd rows of n_head heads.
        projections = ("q_proj", "k_proj", "v_proj")
        qkv_weight = sd[f"{ours}attn.qkv_proj.weight"].chunk(3, dim=0)
        for name, weight in zip(projections, qkv_weight, strict=True):
            out[f"{theirs}self_attn.{name}.weight"] = weight.contiguous()
        out[f"{theirs}self_attn.o_proj.weight"] = sd[f"{ours}attn.out_proj.weight"]
        up = sd[f"{ours}mlp.up_proj.weight"]
        out[f"{theirs}mlp.gate_proj.weight"] = up
        out[f"{theirs}mlp.up_proj.weight"] = up.clone()  # two tensors: safetensors shares none
        out[f"{theirs}mlp.down_proj.weight"] = sd[f"{ours}mlp.down_proj.weight"]
        if setting(mc, "bias"):  # Llama only
            qkv_bias = sd[f"{ours}attn.qkv_proj.bias"].chunk(3, dim=0)
            for name, bias in zip(projections, qkv_bias, strict=True):
                out[f"{theirs}self_attn.{name}.bias"] = bias.contiguous()
            out[f"{theirs}self_attn.o_proj.bias"] = sd[f"{ours}attn.out_proj.bias"]
            out[f"{theirs}mlp.gate_proj.bias"] = sd[f"{ours}mlp.up_proj.bias"]
            out[f"{theirs}mlp.up_proj.bias"] = sd[f"{ours}mlp.up_proj.bias"].clone()
            out[f"{theirs}mlp.down_proj.bias"] = sd[f"{ours}mlp.down_proj.bias"]
        if qk_norm:  # our QK-norm has no gain: Qwen3's is 1
            ones = sd[f"{ours}ln_1.weight"].new_ones(head_size)
            out[f"{theirs}self_attn.q_norm.weight"] = ones
            out[f"{theirs}self_attn.k_norm.weight"] = ones.clone()
    if not setting(mc, "tie_embeddings"):
        out["lm_head.weight"] = sd["lm_head.weight"]
    return out


def _qwen3_config(mc: dict) -> dict:
    config = _rope_config(mc)
    del config["mlp_bias"]
    # Our rolling KV cache: past block_size, each query sees the last block_size keys.
    window = {"use_sliding_window": True, "sliding_window": mc["block_size"]}
    layers = {"max_window_layers": 0, "layer_types": ["sliding_attention"] * mc["n_layer"]}
    # RoPE keeps no table of positions, so the window slides on with no end, as
    # sample.py's does. block_size here would make generate warn "exceeded the model's
    # predefined maximum length" past it and cap its default max_length.
    config["max_position_embeddings"] = QWEN3_MAX_POSITIONS
    return {**config, **window, **layers}


GPT2 = Architecture(
    "GPT2LMHeadModel",
    "GPT2Config",
    {
        "position": "learned",
        "norm": "layernorm",
        "activation": "gelu",
        "qk_norm": False,
        "logit_softcap": 0.0,
    },
    _gpt2_config,
    _gpt2_weights,
    past_block_size="stops",
)
QWEN3 = Architecture(
    "Qwen3ForCausalLM",
    "Qwen3Config",
    {
        "position": "rope",
        "norm": "rmsnorm",
        "activation": "relu2",
        "qk_norm": True,
        "bias": False,
        "logit_softcap": 0.0,
    },
    _qwen3_config,
    lambda mc, sd: _rope_weights(mc, sd, qk_norm=True),
    past_block_size="slides",
)
LLAMA = Architecture(
    "LlamaForCausalLM",
    "LlamaConfig",
    {
        "position": "rope",
        "norm": "rmsnorm",
        "activation": "relu2",
        "qk_norm": False,
        "logit_softcap": 0.0,
    },
    _rope_config,
    lambda mc, sd: _rope_weights(mc, sd, qk_norm=False),
    past_block_size="differs",
)
ARCHITECTURES = (GPT2, QWEN3, LLAMA)


def choose_architecture(model_config: dict, checkpoint: Path | None = None) -> Architecture:
    """The architecture that computes this model's function.

    Args:
        model_config: a checkpoint's ``model_config`` (GPTConfig fields).
        checkpoint: the checkpoint's file: its run folder's config.yaml is the recipe
            a refusal tells to train again (`training.run_folder.training_command`).

    Raises:
        ExportError: if none does; one line naming the nearest class, the keys that
            differ from what it needs, and the command that trains the run again with
            them (its own config, into a new folder), to export as that class.
    """
    for architecture in ARCHITECTURES:
        if not architecture.differences(model_config):
            return architecture
    nearest = min(ARCHITECTURES, key=lambda a: len(a.differences(model_config)))
    message = (
        f"no transformers architecture computes this model's function; the nearest, "
        f"{nearest.class_name}, needs {', '.join(nearest.differences(model_config))}"
    )
    if checkpoint is not None:
        # The trainer's module, on this error path only: an export does without it.
        from training.run_folder import training_command

        folder = Path(checkpoint).parent
        retrain = training_command(
            folder,
            *nearest.missing_settings(model_config),
            f"out_dir={folder}_{nearest.short_name}",
        )
        message += f"; to export as {nearest.class_name}, train it again with them: {retrain}"
    raise ExportError(message)
