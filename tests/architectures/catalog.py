"""One small config per architecture in mlx-lm's `models/`, or why it cannot be built small.

Each entry's `config` holds only what differs from `build.SHARED` (hidden 64, 2 layers of 4
heads, 4 experts, sliding windows of 8, the tiny tokenizer's vocabulary of 1024); layer patterns
are cut to one layer of each kind, or 4 layers where a pattern needs them. A wrapper model's
`text_config` names its text model's argument class under "args". `unbuildable` says why an
architecture has no row in the matrix, `unquantizable` why it has no 4-bit copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.architectures.build import WINDOW

# modules of mlx_lm.models that are not architectures (shared layers, caches, helpers)
HELPER_MODULES = frozenset(
    {
        "activations",
        "base",
        "bitlinear_layers",
        "cache",
        "gated_delta",
        "mla",
        "pipeline",
        "rope_utils",
        "ssm",
        "switch_layers",
    }
)
S, F = "sliding_attention", "full_attention"
YARN = {
    "type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 256,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
GRANITE = dict.fromkeys(
    ("logits_scaling", "attention_multiplier", "embedding_multiplier", "residual_multiplier"), 1.0
)
LINEAR_ATTENTION = {  # gated delta-net layers (qwen3_next, qwen3_5, olmo_hybrid)
    "linear_num_value_heads": 4,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
}


@dataclass(frozen=True)
class Arch:
    """An mlx-lm architecture (its module name) and how the matrix builds it small."""

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    unbuildable: str | None = None  # why no small random model of it runs here
    unquantizable: str | None = None  # why it has no 4-bit copy

    @property
    def buildable(self) -> bool:
        return self.unbuildable is None


def _text(args: str, **config: Any) -> dict[str, Any]:
    return {"text_config": {"args": args, **config}}


CATALOG: list[Arch] = [
    Arch("Klear", {"mlp_only_layers": [0], "decoder_sparse_step": 1}),
    Arch(
        "afm7",
        {"num_layers": 4, "num_kv_reuse_layers": 2},
        unquantizable="mlx-lm's quantize_model fails on it: FusedLinear.to_quantized() got an "
        "unexpected keyword argument 'mode'",
    ),
    Arch("afmoe", {"layer_types": [S, F], "num_dense_layers": 1}),
    Arch("apertus", {"post_norm": True, "qk_norm": True}),
    Arch("baichuan_m1", {"sliding_window_layers": [0], "conv_window": 2}),
    Arch("bailing_hybrid", {"num_hidden_layers": 4, "layer_group_size": 2, "group_norm_size": 1}),
    Arch("bailing_moe"),
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
    Arch("bitnet", unbuildable="its BitLinear layers run a Metal kernel: Apple silicon only"),
    Arch("cohere"),
    Arch("cohere2", {"sliding_window_pattern": 2}),
    Arch(
        "dbrx",
        {
            "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2},
            "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000},
        },
    ),
    Arch("deepseek"),
    Arch("deepseek_v2", {"rope_scaling": YARN}),
    Arch("deepseek_v3"),
    Arch("deepseek_v32", {"index_head_dim": 16, "index_n_heads": 2, "index_topk": 4}),
    Arch("deepseek_v41"),
    Arch("dots1"),
    Arch("ernie4_5"),
    Arch("ernie4_5_moe", {"moe_num_experts": 4, "moe_k": 2}),
    Arch("exaone"),
    Arch(
        "exaone4",
        # transformers reads layer_types (its config cannot take a string pattern alone)
        {"rope_scaling": None, "sliding_window_pattern": "LG", "layer_types": [S, F]},
    ),
    Arch("exaone_moe", {"layer_types": [S, F], "is_moe_layer": [False, True]}),
    Arch("falcon_h1"),
    Arch("gear", {"layer_types": [S, F]}),
    Arch("gemma"),
    Arch("gemma2", {"query_pre_attn_scalar": 16}),
    Arch(
        "gemma3",
        _text("gemma3_text", sliding_window_pattern=2, query_pre_attn_scalar=16),
    ),
    Arch("gemma3_text", {"sliding_window_pattern": 2, "query_pre_attn_scalar": 16}),
    Arch(
        "gemma3n",
        _text(
            "gemma3n:TextConfig",
            num_hidden_layers=4,
            num_kv_shared_layers=2,
            vocab_size_per_layer_input=1024,
            rope_local_base_freq=10000.0,
            final_logit_softcapping=30.0,
            layer_types=[S, F, S, F],
            activation_sparsity_pattern=[0.0] * 4,
            hidden_size_per_layer_input=16,
            altup_num_inputs=2,
            altup_coef_clip=120.0,
            altup_correct_scale=True,
            altup_active_idx=0,
            laurel_rank=8,
        ),
    ),
    Arch(
        "gemma4",
        _text(
            "gemma4_text",
            **{
                "layer_types": [S, F],
                "num_kv_shared_layers": 0,
                "global_head_dim": 16,
                "hidden_size_per_layer_input": 16,
                "vocab_size_per_layer_input": 1024,
            },
        ),
    ),
    Arch(
        "gemma4_text",
        {
            "layer_types": [S, S, F, S, S, F],
            "num_hidden_layers": 6,
            "num_kv_shared_layers": 2,
            "global_head_dim": 16,
            "hidden_size_per_layer_input": 16,
            "vocab_size_per_layer_input": 1024,
            "enable_moe_block": True,
            "num_experts": 4,
            "top_k_experts": 2,
            "moe_intermediate_size": 32,
        },
    ),
    Arch("glm"),
    Arch("glm4", {"partial_rotary_factor": 0.5}),
    Arch("glm4_moe", {"rope_scaling": None, "use_qk_norm": True, "partial_rotary_factor": 0.5}),
    Arch("glm4_moe_lite"),
    Arch(
        "glm_moe_dsa",
        {
            "index_head_dim": 16,
            "index_n_heads": 2,
            "index_topk": 4,
            "topk_method": "noaux_tc",
            "scoring_func": "sigmoid",
            "moe_layer_freq": 1,
            "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        },
    ),
    Arch("gpt2"),
    Arch("gpt_bigcode"),
    Arch("gpt_neox", {"rotary_emb_base": 10000, "rotary_pct": 0.25}),
    Arch("gpt_oss", {"layer_types": [S, F]}),
    Arch("gptj", {"rotary_dim": 8}),
    Arch("granite", GRANITE),
    Arch("granitemoe", GRANITE),
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
    Arch("helium"),
    Arch(
        "hunyuan",
        {
            "use_mixed_mlp_moe": True,
            "use_qk_norm": True,
            "use_cla": True,
            "cla_share_factor": 2,
            "rope_scaling": {"alpha": 1000.0, "factor": 1.0, "type": "dynamic"},
        },
    ),
    Arch("hunyuan_v1_dense"),
    Arch("internlm2"),
    Arch("internlm3"),
    Arch("iquestloopcoder", {"loop_num": 2, "loop_window_size": WINDOW}),
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
    Arch("kimi_k25", _text("deepseek_v3")),
    Arch(
        "kimi_k3",
        _text(
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
    Arch("kimi_vl", _text("kimi_vl:TextArgs")),
    Arch("laguna", {"layer_types": [F, S], "mlp_layer_types": ["dense", "sparse"]}),
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
        _text(
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
    Arch("lille-130m"),
    Arch("llama"),
    Arch(
        "llama4",
        _text(
            "llama4:TextArgs",
            num_hidden_layers=4,
            attention_chunk_size=WINDOW,
            interleave_moe_layer_step=2,
            num_experts_per_tok=1,  # mlx-lm's llama4 supports one
            intermediate_size_mlp=128,
            rope_scaling=None,
            use_qk_norm=True,
        ),
    ),
    Arch(
        "llama4_text",
        {
            "num_hidden_layers": 4,
            "intermediate_size_mlp": 128,
            "no_rope_layers": [1, 1, 1, 0],
            "use_qk_norm": True,
        },
    ),
    Arch(
        "longcat_flash",
        {
            "attention_method": "MLA",
            "zero_expert_type": "identity",
            "zero_expert_num": 2,
            "mla_scale_q_lora": True,
            "mla_scale_kv_lora": True,
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
        "mellum",
        {
            "layer_types": [S, F],
            "rope_parameters": {S: {"rope_theta": 10000.0}, F: {"rope_theta": 10000.0}},
        },
    ),
    Arch("mimo"),
    Arch(
        "mimo_v2_flash",
        {
            "hybrid_layer_pattern": [0, 1],
            "moe_layer_freq": [0, 1],
            "add_swa_attention_sink_bias": True,
            "add_full_attention_sink_bias": False,
            "sliding_window_size": WINDOW,
            "topk_method": "noaux_tc",
            "scoring_func": "sigmoid",
            "layernorm_epsilon": 1e-5,
            "swa_rope_theta": 10000.0,
            "swa_num_attention_heads": 4,
            "swa_num_key_value_heads": 2,
            "v_head_dim": 16,
            "swa_head_dim": 16,
            "swa_v_head_dim": 16,
            "partial_rotary_factor": 0.5,
        },
    ),
    Arch("minicpm", {"dim_model_base": 64, "scale_depth": 1.0, "scale_emb": 1.0}),
    Arch(
        "minicpm3",
        {
            "dim_model_base": 64,
            "scale_depth": 1.0,
            "scale_emb": 1.0,
            "rope_scaling": {"original_max_position_embeddings": 1024},
        },
    ),
    Arch("minimax", {"rotary_dim": 8}),
    Arch("minimax_m3_vl", _text("minimax_m3_vl:TextArgs", dense_intermediate_size=128)),
    Arch(
        "ministral3",
        {
            "rope_parameters": {
                "rope_theta": 10000.0,
                "llama_4_scaling_beta": 0.1,
                "original_max_position_embeddings": 1024,
            },
            "layer_types": [S, F],
        },
    ),
    Arch("mistral3", _text("llama", model_type="llama")),
    Arch(
        "mistral4",
        {
            "rope_parameters": {
                "rope_theta": 10000.0,
                "llama_4_scaling_beta": 0.1,
                "original_max_position_embeddings": 1024,
            }
        },
    ),
    Arch("mixtral"),
    Arch("muse_glimmer", {"layer_types": [S, F]}),
    Arch("muse_spark", unbuildable="its layers call Metal kernels (mlx_lm.kernels): Apple only"),
    Arch("nanbeige"),
    Arch("nanochat"),
    Arch(
        "nemotron-nas",
        {
            "block_configs": [
                {
                    "attention": {"n_heads_in_group": 2, "no_op": False},
                    "ffn": {"ffn_mult": 1.0, "no_op": False},
                }
            ]
            * 2,
        },
    ),
    Arch("nemotron", {"hidden_act": "relu2"}),
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
    Arch("olmo", unbuildable="mlx-lm's module needs the ai2-olmo package, which is not installed"),
    Arch("olmo2"),
    Arch("olmo3", {"layer_types": [S, F]}),
    Arch(
        "olmo_hybrid",
        {
            **LINEAR_ATTENTION,
            "linear_allow_neg_eigval": True,
            "layer_types": ["linear_attention", F],
        },
    ),
    Arch("olmoe"),
    Arch(
        "openelm",
        {
            "ffn_dim_divisor": 16,
            "num_query_heads": [4] * 2,
            "num_kv_heads": [2] * 2,
            "ffn_multipliers": [2.0] * 2,
            "num_transformer_layers": 2,
        },
    ),
    Arch("phi"),
    Arch("phi3"),
    Arch(
        "phi3small",
        unbuildable="mlx-lm's phi3small crashes this process (segmentation fault, in most runs) "
        "in its first decode step after a prompt on the Linux CPU backend (mlx 0.32.4), "
        "in mlx_lm.generate alone",
    ),
    Arch("phimoe"),
    Arch("phixtral", {"num_vocab": 1024, "rotary_dim": 8}),
    Arch("pixtral", _text("llama", model_type="llama")),
    Arch("plamo", {"n_shared_head": 2}),
    Arch("plamo2"),
    Arch("plamo3"),
    Arch(
        "prism_hadamard_qwen35",
        unbuildable="needs the Hadamard rotation pack its converter writes next to the weights",
    ),
    Arch("qwen", {"kv_channels": 16}),
    Arch("qwen2"),
    Arch("qwen2_moe"),
    Arch("qwen2_vl", _text("qwen2")),
    Arch("qwen3"),
    Arch(
        "qwen3_5",
        _text(
            "qwen3_5:TextModelArgs",
            **LINEAR_ATTENTION,
            full_attention_interval=2,
            partial_rotary_factor=0.5,
        ),
    ),
    Arch(
        "qwen3_5_moe",
        _text(
            "qwen3_5:TextModelArgs",
            **LINEAR_ATTENTION,
            full_attention_interval=2,
            partial_rotary_factor=0.5,
        ),
    ),
    Arch("qwen3_moe", {"decoder_sparse_step": 1, "mlp_only_layers": []}),
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
    Arch("qwen3_vl", _text("qwen3")),
    Arch("qwen3_vl_moe", _text("qwen3_moe", decoder_sparse_step=1, mlp_only_layers=[])),
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
    Arch("seed_oss"),
    Arch("smollm3"),
    Arch("solar_open", {"partial_rotary_factor": 1.0}),
    Arch(
        "spark2_5",
        {
            "layer_types": [S, F],
            "rope_parameters": {S: {"rope_theta": 10000.0}, F: {"rope_theta": 10000.0}},
        },
    ),
    Arch("stablelm", {"use_qkv_bias": False, "partial_rotary_factor": 0.25}),
    Arch("starcoder2"),
    Arch(
        "step3p5",
        {
            "num_attention_groups": 2,
            "layer_types": [S, F],
            "partial_rotary_factors": [1.0, 0.5],
            "moe_num_experts": 4,
            "moe_top_k": 2,
            "moe_intermediate_size": 32,
            "share_expert_dim": 32,
            "moe_layers_enum": "1",
        },
    ),
    Arch("talkie"),
    Arch("telechat3"),
    Arch("youtu_llm"),
]

BY_NAME = {a.name: a for a in CATALOG}
