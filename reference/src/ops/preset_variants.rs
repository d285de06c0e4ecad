//! The kernels of the Ascend presets whose op has no tiling dispatch worth modelling: one
//! kernel per preset (MC2 MatmulAllReduce on A2, the MoE dispatch/combine v2, QingCheng's FP4
//! kernels). Each preset is its variant, so that it too states the SoCs and CANN releases it
//! was read for, `conform explain` and the results name the kernel, and a device outside them
//! is judged without the preset's bits (docs/ascend.md, each family's `.variant` row).
//!
//! `mx_ocp` is not here: it is the OCP format's definition, which the torch_npu worker's FP4
//! cast path is judged against, not a CANN kernel's arithmetic; where that cast exists is the
//! worker's check (`dq.cann_cast.devices`, `npu.fp4.cast_release`). Neither is MC2's
//! `high_precision_golden`, CANN's test golden rather than a kernel.

use crate::variant::{KernelVariant, Release, ReleaseRange, Soc, Stage};

/// ops-transformer's first open release line (8.3.RC1).
const OPEN_SOURCE: Release = Release::new(8, 3, 0).at(Stage::Candidate(1));

/// The MatmulAllReduce kernel as hicann/ops-transformer@c29bc10 has it: the 8.3.RC1 line up to
/// the 8.5.0 alpha builds; later releases were not re-read.
const MC2_RELEASES: ReleaseRange =
    ReleaseRange::new(OPEN_SOURCE, Some(Release::new(8, 5, 0).at(Stage::Beta(1))));

/// The non-quantised MatmulAllReduce of an Ascend910B, one variant per hypothesis about HCCL's
/// reduction order (the kernel is the same; the order is not in the open source).
const fn mc2(preset: &'static str) -> KernelVariant {
    KernelVariant {
        id: preset,
        preset,
        tiling: "mc2/matmul_all_reduce/op_host/op_tiling/matmul_all_reduce_tiling_910.cpp MatmulAllReduceTiling910::IsCapable",
        key: "the non-quantised 910 template registered in matmul_all_reduce_tiling.cpp",
        kernel: "mc2/matmul_all_reduce/op_kernel/matmul_all_reduce_910_general.h",
        socs: &[Soc::A2],
        releases: MC2_RELEASES,
        conventions: &[],
    }
}

pub static MC2_RANK_ORDER: KernelVariant = mc2("kernel_rank_order");
pub static MC2_RING: KernelVariant = mc2("kernel_ring");
pub static MC2_BINARY_TREE: KernelVariant = mc2("kernel_binary_tree");

/// Dispatch and combine v2: on Ascend910B the v2 tiling runs the A2 kernels (tiling key 2000,
/// when its attribute checks pass); on Ascend910_93 the v2 kernels. The two compute the same
/// numbers for the preset's arithmetic; the layout rows were read in the A3 kernel.
pub static MOE_V2: KernelVariant = KernelVariant {
    id: "ascend_v2",
    preset: "ascend_v2",
    tiling: "mc2/moe_distribute_dispatch_v2/op_host/op_tiling/moe_distribute_dispatch_v2_tiling.cpp MoeDistributeDispatchA2CheckAttrAndSetTiling",
    key: "2000 on Ascend910B (the A2 kernels); on Ascend910_93 the v2 kernels (moe_distribute_dispatch_v2.h, moe_distribute_combine_v2.h)",
    kernel: "mc2/moe_distribute_dispatch/op_kernel/moe_distribute_dispatch_a2.h and mc2/moe_distribute_combine/op_kernel/moe_distribute_combine_a2.h",
    socs: &[Soc::A2, Soc::A3],
    releases: ReleaseRange::new(OPEN_SOURCE, None),
    conventions: &[],
};

/// QingCheng's FP4 -> BF16 dequant kernel: one kernel, built from its own repository against
/// an installed CANN, so no CANN release bounds it.
pub static QINGCHENG_FP4_DEQUANT: KernelVariant = KernelVariant {
    id: "ascend_qingcheng_fp4_dequant",
    preset: "ascend_qingcheng_fp4_dequant",
    tiling: "dequant_kernels/fp4_to_bf16_custom.cpp, no tiling dispatch: one kernel",
    key: "none (one kernel)",
    kernel: "dequant_kernels/fp4_to_bf16_custom.cpp",
    socs: &[Soc::A2, Soc::A3],
    releases: ReleaseRange::EVERY,
    conventions: &[],
};

/// QingCheng's W4A16 grouped matmul: its tiling always sets key 0.
pub static QINGCHENG_W4A16: KernelVariant = KernelVariant {
    id: "ascend_qingcheng_w4a16",
    preset: "ascend_qingcheng_w4a16",
    tiling: "grouped_gemm/op_host/grouped_matmul_antiquant_tiling.cpp GMMTiling::DivideUbAndSetWorkspaceAntiquant",
    key: "0 (GMMAntiquantComputeNorm)",
    kernel: "grouped_gemm/op_kernel/grouped_matmul_antiquant.cpp",
    socs: &[Soc::A2, Soc::A3],
    releases: ReleaseRange::EVERY,
    conventions: &[],
};
