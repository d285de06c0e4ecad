//! The hardware profiles built into the library (their text, at compile time), so that a suite
//! can name one (`recipe_hardware`) wherever its files are copied. A timing run's profile
//! (`run --hardware`, `perf`, `validate`) comes from [`project_profile`]: the project's file
//! where it has one, else the built-in profile of that name, so a suite copied without
//! `ci/hardware/` still runs.

use super::error::PerfError;
use super::hardware::HardwareProfile;

mod built_in {
    include!(concat!(env!("OUT_DIR"), "/hardware_profiles.rs"));
}

/// The ids of the profiles built into the library.
pub fn built_in_ids() -> Vec<&'static str> {
    built_in::PROFILES.iter().map(|(id, _)| *id).collect()
}

/// The built-in profile `id` (parsed and validated as a file of that name would be), or None
/// when there is no such profile.
pub fn built_in(id: &str) -> Option<Result<HardwareProfile, PerfError>> {
    let (_, text) = built_in::PROFILES.iter().find(|(i, _)| *i == id)?;
    let path = std::path::PathBuf::from(format!("ci/hardware/{id}.toml"));
    Some(HardwareProfile::from_toml(text, &path))
}

/// Profile `id` for the project at `root`: `<root>/ci/hardware/<id>.toml` when that file exists
/// (a profile the project adds or edits), else the built-in profile `id`; neither is the
/// error of reading the file.
pub fn project_profile(root: &std::path::Path, id: &str) -> Result<HardwareProfile, PerfError> {
    let path = root.join("ci").join("hardware").join(format!("{id}.toml"));
    if !path.exists()
        && let Some(profile) = built_in(id)
    {
        return profile;
    }
    HardwareProfile::load(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_profiles_are_the_files_and_the_npus_say_their_soc() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/hardware");
        let on_disk = super::super::hardware::load_profiles(&dir).unwrap();
        let ids = built_in_ids();
        assert_eq!(
            ids.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            on_disk.keys().cloned().collect::<Vec<_>>()
        );
        for id in ids {
            let p = built_in(id).unwrap().unwrap();
            assert_eq!(&p, &on_disk[id], "{id}");
            if p.kind == super::super::hardware::DeviceKind::Npu && id != "atlas-300i-duo" {
                let soc = p.soc.as_ref().unwrap_or_else(|| panic!("{id}: no [soc]"));
                assert_eq!(soc.vector_cores, 2 * soc.cube_cores, "{id}: A2 pairs");
            }
        }
        let a2 = built_in("atlas-800i-a2").unwrap().unwrap().soc.unwrap();
        assert_eq!(
            (a2.name.as_str(), a2.ai_cores, a2.vector_cores),
            ("Ascend910B4", 20, 40)
        );
        assert_eq!(
            super::super::soc::recipe_params(&a2),
            vec![("vector_cores", 40.into())]
        );
        assert!(built_in("no-such-machine").is_none());
    }

    #[test]
    fn a_project_without_the_profile_file_gets_the_built_in_one_and_its_own_file_wins() {
        let root = tempfile::tempdir().unwrap();
        let built = built_in("this-cpu").unwrap().unwrap();
        assert_eq!(project_profile(root.path(), "this-cpu").unwrap(), built);
        // Neither a file nor a built-in profile: the file's read error, naming the path.
        let e = project_profile(root.path(), "no-such-machine").unwrap_err();
        assert!(e.to_string().contains("no-such-machine.toml"), "{e}");
        // The project's own file, where it has one, is read instead.
        let dir = root.path().join("ci/hardware");
        std::fs::create_dir_all(&dir).unwrap();
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/hardware");
        let text = std::fs::read_to_string(repo.join("this-cpu.toml")).unwrap();
        let edited = text.replace(
            "memory_bandwidth_gbps = 10.6",
            "memory_bandwidth_gbps = 1.5",
        );
        assert_ne!(edited, text, "the profile's bandwidth line moved");
        std::fs::write(dir.join("this-cpu.toml"), edited).unwrap();
        let own = project_profile(root.path(), "this-cpu").unwrap();
        assert_ne!(own, built);
        assert_eq!(own.memory_bandwidth_gbps, Some(1.5));
    }
}
