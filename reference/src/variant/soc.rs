//! The Ascend SoCs a kernel variant is described for, by the names `torch.npu.get_device_name`
//! returns (torch_npu's `SocVersion` names: `Ascend910B1` .. `Ascend910B4`, `Ascend910_9391`
//! ..) and the products they are sold in.

use std::fmt;

/// An Ascend SoC family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Soc {
    /// `Ascend910B*`: Atlas 800I/800T A2, Atlas 300I A2 (CANN's `ascend910b`).
    A2,
    /// `Ascend910_93*`: Atlas A3 (CANN's `ascend910_93`).
    A3,
}

impl Soc {
    /// Every family, in order.
    pub const ALL: [Soc; 2] = [Soc::A2, Soc::A3];

    /// The family of a device name as a worker reports it (`Ascend910B3`, `Ascend 910B3`,
    /// `Ascend910_9392`), or `None` for any other name (a CPU, a GPU, another Ascend part).
    pub fn from_device(name: &str) -> Option<Soc> {
        let compact: String = name
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        let at = compact.find("ascend910")?;
        let rest = &compact[at + "ascend910".len()..];
        if rest.starts_with("_93") {
            Some(Soc::A3)
        } else if rest.starts_with('b') {
            Some(Soc::A2)
        } else {
            None
        }
    }
}

impl fmt::Display for Soc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Soc::A2 => "Ascend910B (Atlas A2)",
            Soc::A3 => "Ascend910_93 (Atlas A3)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_map_to_their_family() {
        assert_eq!(Soc::from_device("Ascend910B3"), Some(Soc::A2));
        assert_eq!(Soc::from_device("Ascend 910B4-1"), Some(Soc::A2));
        assert_eq!(Soc::from_device("Ascend910_9392"), Some(Soc::A3));
        assert_eq!(Soc::from_device("Ascend910A"), None);
        assert_eq!(Soc::from_device("Ascend310P3"), None);
        assert_eq!(Soc::from_device("NVIDIA H200"), None);
        assert_eq!(Soc::from_device("cpu"), None);
    }
}
