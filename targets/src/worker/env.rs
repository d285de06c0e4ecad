//! `[env]` of a `target.toml`: each variable is either set outright (`NAME = "value"`, which
//! replaces what the worker would inherit) or edited, keeping the inherited value:
//!
//! ```toml
//! [env]
//! CONFORM_FLAG = "1"                                         # set: replaces the inherited value
//! PYTHONPATH = { prepend = "${REPO}/targets/python" }        # ours first, then the inherited one
//! LD_LIBRARY_PATH = { append = "/opt/vendor/lib" }           # the inherited one, then ours
//! FLAGS = { prepend = "-a", append = "-z", separator = " " } # both; ":" unless told otherwise
//! ```
//!
//! An edit keeps what the environment that started conform holds (a toolkit's `set_env.sh`
//! exports `PYTHONPATH`, `LD_LIBRARY_PATH` and the operator paths a device runtime needs); a
//! set value drops it, which is right only for variables the worker alone owns. The inherited
//! value is read once, when the declaration is resolved; an unset or empty one leaves just the
//! edit's own parts (no stray separator).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// One `[env]` entry.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub enum EnvValue {
    /// `NAME = "value"`: the variable is this value, whatever the worker would inherit.
    Set(String),
    /// `NAME = { prepend = ..., append = ..., separator = ... }`: the inherited value with
    /// these parts before and after it.
    Edit(EnvEdit),
}

impl EnvValue {
    /// The text the entry declares (the value set, or the parts an edit puts around the
    /// inherited value), placeholders unexpanded: what names files (`${REPO}/...`).
    pub fn declared_parts(&self) -> Vec<&str> {
        match self {
            EnvValue::Set(s) => vec![s.as_str()],
            EnvValue::Edit(e) => e
                .prepend
                .iter()
                .chain(&e.append)
                .map(String::as_str)
                .collect(),
        }
    }
}

/// Parts put around an inherited value.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvEdit {
    pub prepend: Option<String>,
    pub append: Option<String>,
    /// Between the parts; `:` (a search path) unless the entry says otherwise.
    pub separator: String,
}

/// The separator of a path list, the usual thing to edit.
pub const DEFAULT_SEPARATOR: &str = ":";

/// Why an `[env]` entry of a worker config is neither a string nor an edit.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EnvValueError {
    #[error(
        "an environment value is a string, or a table with `prepend` and/or `append` (and \
         optionally `separator`), not a {0}"
    )]
    WrongType(&'static str),
    #[error("`{0}` must be a string")]
    NotAString(String),
    #[error("unknown key `{0}` (an edit takes `prepend`, `append` and `separator`)")]
    UnknownKey(String),
    #[error(
        "an edit needs `prepend` or `append` (or both); to set the variable outright give it a \
         string"
    )]
    EmptyEdit,
}

impl TryFrom<toml::Value> for EnvValue {
    type Error = EnvValueError;

    fn try_from(v: toml::Value) -> Result<EnvValue, EnvValueError> {
        let table = match v {
            toml::Value::String(s) => return Ok(EnvValue::Set(s)),
            toml::Value::Table(t) => t,
            other => return Err(EnvValueError::WrongType(other.type_str())),
        };
        let mut edit = EnvEdit {
            prepend: None,
            append: None,
            separator: DEFAULT_SEPARATOR.to_string(),
        };
        for (key, value) in table {
            let toml::Value::String(s) = value else {
                return Err(EnvValueError::NotAString(key));
            };
            match key.as_str() {
                "prepend" => edit.prepend = Some(s),
                "append" => edit.append = Some(s),
                "separator" => edit.separator = s,
                _ => return Err(EnvValueError::UnknownKey(key)),
            }
        }
        if edit.prepend.is_none() && edit.append.is_none() {
            return Err(EnvValueError::EmptyEdit);
        }
        Ok(EnvValue::Edit(edit))
    }
}

/// The environment a worker is started with on top of conform's own: every entry of `env`
/// with its placeholders `expand`ed, edits applied to what `inherited` returns for the name
/// (`std::env::var_os` in use; a parameter so that the rule is testable).
pub fn resolve_env(
    env: &BTreeMap<String, EnvValue>,
    expand: impl Fn(&str) -> String,
    inherited: impl Fn(&str) -> Option<OsString>,
) -> BTreeMap<String, OsString> {
    env.iter()
        .map(|(name, value)| {
            let resolved = match value {
                EnvValue::Set(s) => OsString::from(expand(s)),
                EnvValue::Edit(e) => edited(e, &expand, inherited(name).as_deref()),
            };
            (name.clone(), resolved)
        })
        .collect()
}

/// `prepend`, the inherited value (when not empty) and `append`, joined by the separator.
fn edited(e: &EnvEdit, expand: &impl Fn(&str) -> String, inherited: Option<&OsStr>) -> OsString {
    let mut parts: Vec<OsString> = Vec::with_capacity(3);
    if let Some(p) = &e.prepend {
        parts.push(expand(p).into());
    }
    if let Some(old) = inherited.filter(|v| !v.is_empty()) {
        parts.push(old.to_os_string());
    }
    if let Some(a) = &e.append {
        parts.push(expand(a).into());
    }
    let mut out = OsString::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(&e.separator);
        }
        out.push(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BTreeMap<String, EnvValue>, toml::de::Error> {
        #[derive(Deserialize)]
        struct Doc {
            env: BTreeMap<String, EnvValue>,
        }
        toml::from_str::<Doc>(text).map(|d| d.env)
    }

    fn run(
        env: &BTreeMap<String, EnvValue>,
        inherited: &[(&str, &str)],
    ) -> BTreeMap<String, String> {
        let expand = |s: &str| s.replace("${REPO}", "/repo");
        let lookup = |name: &str| {
            inherited
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        };
        resolve_env(env, expand, lookup)
            .into_iter()
            .map(|(k, v)| (k, v.into_string().unwrap()))
            .collect()
    }

    #[test]
    fn a_string_replaces_and_an_edit_keeps_the_inherited_value() {
        let env = parse(
            r#"[env]
SET = "${REPO}/x"
PYTHONPATH = { prepend = "${REPO}/targets/python" }
LD_LIBRARY_PATH = { append = "/opt/lib" }
FLAGS = { prepend = "-a", append = "-z", separator = " " }
"#,
        )
        .unwrap();
        let inherited = [
            ("SET", "dropped"),
            ("PYTHONPATH", "/toolkit/python/site-packages:/toolkit/opp"),
            ("LD_LIBRARY_PATH", "/toolkit/lib64"),
            ("FLAGS", "-m"),
        ];
        let got = run(&env, &inherited);
        assert_eq!(got["SET"], "/repo/x");
        assert_eq!(
            got["PYTHONPATH"],
            "/repo/targets/python:/toolkit/python/site-packages:/toolkit/opp"
        );
        assert_eq!(got["LD_LIBRARY_PATH"], "/toolkit/lib64:/opt/lib");
        assert_eq!(got["FLAGS"], "-a -m -z");
    }

    #[test]
    fn an_unset_or_empty_inherited_value_leaves_no_stray_separator() {
        let env = parse(
            "[env]\nA = { prepend = \"x\" }\nB = { append = \"y\" }\nC = { prepend = \"p\", append = \"q\" }\n",
        )
        .unwrap();
        for inherited in [&[][..], &[("A", ""), ("B", ""), ("C", "")][..]] {
            let got = run(&env, inherited);
            assert_eq!(
                (got["A"].as_str(), got["B"].as_str(), got["C"].as_str()),
                ("x", "y", "p:q")
            );
        }
    }

    #[test]
    fn an_inherited_value_that_is_not_utf8_is_kept_byte_for_byte() {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let env = parse("[env]\nP = { prepend = \"/a\" }\n").unwrap();
        let raw = OsString::from_vec(vec![b'/', 0xff, b'b']);
        let got = resolve_env(&env, |s| s.to_string(), |_| Some(raw.clone()));
        assert_eq!(got["P"].as_bytes(), b"/a:/\xffb");
    }

    #[test]
    fn malformed_entries_say_what_an_entry_takes() {
        for (text, needle) in [
            ("[env]\nP = 3\n", "not a integer"),
            ("[env]\nP = {}\n", "needs `prepend` or `append`"),
            (
                "[env]\nP = { separator = \";\" }\n",
                "needs `prepend` or `append`",
            ),
            ("[env]\nP = { prepnd = \"x\" }\n", "unknown key `prepnd`"),
            ("[env]\nP = { prepend = 1 }\n", "`prepend` must be a string"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(e.contains("env.P") || e.contains("P"), "{text}: {e}");
        }
    }
}
