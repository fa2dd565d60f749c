"""Catalogue entries whose layers also keep a running state besides keys and values (an
ArraysCache: state-space, linear-attention, convolution or n-gram state), as
`build.cache_types` reports them."""

from __future__ import annotations

from tests.architectures.arch import GRANITE, Arch, F, text_config
from tests.architectures.build import WINDOW

LINEAR_ATTENTION = {  # gated delta-net layers (qwen3_next, qwen3_5, olmo_hybrid)
    "linear_num_value_heads": 4,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
}

STATEFUL: list[Arch] = [
    Arch("baichuan_m1", {"sliding_window_layers": [0], "conv_window": 2}),
    Arch("bailing_hybrid", {"num_hidden_layers": 4, "layer_group_size": 2, "group_norm_size": 1}),
    Arch(
        "bailing_moe_linear",
        {
            "num_hidden_layers": 4,
            "layer_group_size": 2,
            "group_norm_size": 1,
            "first_k_dense_replace": 0,
        },
    ),
    Arch("bailing_moe_v3", {"layer_group_size": 2}),
    Arch("falcon_h1"),
    Arch(
        "granitemoehybrid",
        {
            **GRANITE,
            "layer_types": ["mamba", "attention"],
            "mamba_n_heads": 4,
            "mamba_d_head": 32,
            "mamba_d_state": 16,
            "mamba_d_conv": 4,
            "mamba_n_groups": 1,
            "mamba_proj_bias": False,
            "mamba_conv_bias": True,
        },
    ),
    Arch(
        "jamba",
        {
            "attn_layer_offset": 1,
            "attn_layer_period": 2,
            "expert_layer_offset": 1,
            "expert_layer_period": 2,
            "mamba_d_conv": 4,
            "mamba_d_state": 16,
            "mamba_expand": 2,
        },
    ),
    Arch(
        "kimi_k3",
        text_config(
            "kimi_k3:TextArgs",
            linear_attn_config={
                "num_heads": 4,
                "head_dim": 16,
                "kda_layers": [1],
                "short_conv_kernel_size": 4,
            },
            num_experts=4,
            num_experts_per_token=2,
        ),
    ),
    Arch(
        "kimi_linear",
        {
            "linear_attn_config": {"num_heads": 4, "head_dim": 16, "kda_layers": [1]},
            "model_max_length": 1024,
        },
    ),
    Arch(
        "lfm2",
        {
            "conv_bias": False,
            "conv_L_cache": 3,
            "block_dim": 64,
            "block_ff_dim": 128,
            "block_multiple_of": 16,
            "block_ffn_dim_multiplier": 1.0,
            "block_auto_adjust_ff_dim": False,
            "full_attn_idxs": [1],
        },
    ),
    Arch(
        "lfm2-vl",
        text_config(
            "lfm2",
            conv_bias=False,
            conv_L_cache=3,
            block_dim=64,
            block_ff_dim=128,
            block_multiple_of=16,
            block_ffn_dim_multiplier=1.0,
            block_auto_adjust_ff_dim=False,
            full_attn_idxs=[1],
        ),
    ),
    Arch(
        "lfm2_moe",
        {
            "use_expert_bias": True,
            "num_dense_layers": 1,
            "conv_bias": False,
            "conv_L_cache": 3,
            "full_attn_idxs": [1],
        },
    ),
    Arch(
        "longcat_flash_ngram",
        {"zero_expert_num": 2, "mla_scale_q_lora": True, "mla_scale_kv_lora": True},
    ),
    Arch(
        "mamba",
        {"state_size": 16, "conv_kernel": 4, "use_conv_bias": True, "time_step_rank": 8},
    ),
    Arch(
        "mamba2",
        {
            "num_heads": 8,
            "head_dim": 16,
            "state_size": 16,
            "conv_kernel": 4,
            "n_groups": 1,
            "use_conv_bias": True,
            "time_step_limit": [0.0, 1e9],
            "time_step_rank": "auto",
        },
    ),
    Arch(
        "nemotron_h",
        {
            "mamba_num_heads": 4,
            "mamba_head_dim": 16,
            "mamba_proj_bias": False,
            "ssm_state_size": 16,
            "conv_kernel": 4,
            "n_groups": 1,
            "use_conv_bias": True,
            "hybrid_override_pattern": ["M", "*", "M", "-"],
            "num_hidden_layers": 4,
        },
    ),
    Arch(
        "olmo_hybrid",
        {
            **LINEAR_ATTENTION,
            "linear_allow_neg_eigval": True,
            "layer_types": ["linear_attention", F],
        },
    ),
    Arch("plamo2"),
    Arch(
        "qwen3_5",
        text_config(
            "qwen3_5:TextModelArgs",
            **LINEAR_ATTENTION,
            full_attention_interval=2,
            partial_rotary_factor=0.5,
        ),
    ),
    Arch(
        "qwen3_5_moe",
        text_config(
            "qwen3_5:TextModelArgs",
            **LINEAR_ATTENTION,
            full_attention_interval=2,
            partial_rotary_factor=0.5,
        ),
    ),
    Arch(
        "qwen3_next",
        {
            **LINEAR_ATTENTION,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [0],
            "partial_rotary_factor": 0.5,
            "full_attention_interval": 2,
        },
    ),
    Arch(
        "recurrent_gemma",
        {
            "conv1d_width": 3,
            "logits_soft_cap": 30.0,
            "attention_window_size": WINDOW,
            "block_types": ["recurrent", "attention"],
        },
    ),
    Arch(
        "rwkv7",
        {
            "a_low_rank_dim": 8,
            "v_low_rank_dim": 8,
            "gate_low_rank_dim": 8,
            "decay_low_rank_dim": 8,
        },
    ),
]
