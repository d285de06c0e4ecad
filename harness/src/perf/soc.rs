//! The SoC facts of a hardware profile (`[soc]` in `ci/hardware/<id>.toml`): the core counts
//! that kernels choose their run-time tiling by, read from CANN's platform file of the SoC
//! (`<arch>-linux/data/platform_config/<SoC>.ini`, `[SoCInfo]`). The profiles are the one place
//! these numbers are written: a recipe that models such a choice (the decode kernel's
//! flash-decode split over the vector cores) takes them from the profile its suite names
//! (`recipe_hardware`, through [`super::built_in_profiles`]), through the case's parameters
//! ([`recipe_params`]).

use serde::{Deserialize, Serialize};

/// `[soc]`: the SoC a profile's device is, and its core counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocFacts {
    /// The SoC name, as CANN's platform file and `torch.npu.get_device_name` write it
    /// (`Ascend910B4`).
    pub name: String,
    /// `ai_core_cnt`: AI cores (on Atlas A2 / A3 one cube core with two vector cores).
    pub ai_cores: u32,
    /// `cube_core_cnt`.
    pub cube_cores: u32,
    /// `vector_core_cnt`: what the decode kernel's tiling splits a long context over.
    pub vector_cores: u32,
}

impl SocFacts {
    /// The first count that is not positive, by its key.
    pub(super) fn invalid(&self) -> Option<&'static str> {
        [
            ("soc.ai_cores", self.ai_cores),
            ("soc.cube_cores", self.cube_cores),
            ("soc.vector_cores", self.vector_cores),
        ]
        .into_iter()
        .find(|(_, n)| *n == 0)
        .map(|(k, _)| k)
    }
}

/// The case parameters a recipe reads from the SoC it models, in the order they are set:
/// `vector_cores`.
pub const RECIPE_PARAMS: [&str; 1] = ["vector_cores"];

/// [`RECIPE_PARAMS`] with their values for `soc`.
pub fn recipe_params(soc: &SocFacts) -> Vec<(&'static str, serde_json::Value)> {
    vec![(RECIPE_PARAMS[0], soc.vector_cores.into())]
}
