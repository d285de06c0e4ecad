//! The reference's integration tests, in one test binary: the shared helpers (`common`,
//! `attention_common`, `mc2_common`) are compiled once and the binary linked once, instead of
//! once per file. Each file is a module; a test's name starts with its file's name, so
//! `cargo test -p conform-reference --test reference attention_recipes::` runs one file's tests.

mod attention_common;
mod common;
mod mc2_common;
mod op_runs;

mod attention_errors;
mod attention_ops;
mod attention_oracle;
mod attention_paged;
mod attention_recipes;
mod attention_regimes;
mod attention_ties;
mod attention_vexp;
mod dequant_exhaustive;
mod dequant_packing_and_shapes;
mod dynamic_quant;
mod formats_f32_to_half_all_inputs;
mod formats_f64_ties;
mod formats_half_crosscheck;
mod formats_narrow_codes;
mod gemm_blocked;
mod generate_coverage;
mod kv_block_manager;
mod kv_convert;
mod kv_paged_kv_op;
mod kv_scatter_gather;
mod mc2_all_to_all;
mod mc2_companion_ops;
mod mc2_cost_model;
mod mc2_fit;
mod mc2_matmul_all_reduce;
mod mc2_planner;
mod mc2_reduction;
mod mc2_ties;
mod mc2_timeline;
mod mc2_witness;
mod mla_decode;
mod moe_dispatch_combine;
mod pa_decode_int8;
mod quant_matmul;
mod range_regimes;
mod rounding_core;
mod w4a16_matmul;
