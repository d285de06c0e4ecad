//! JSON Schemas of the stable files and messages, generated from the types. They are
//! committed under `docs/schemas/` (`<name>.schema.json`); the test
//! `metadata/tests/schemas_up_to_date.rs` fails when a type changed without its schema, and
//! rewrites them when run with `CONFORM_BLESS_SCHEMAS=1`.

use schemars::{schema_for, Schema};

/// One published schema: its file stem under `docs/schemas/`, what it describes, the schema.
pub struct PublishedSchema {
    pub name: &'static str,
    pub describes: &'static str,
    pub schema: Schema,
}

/// Every published schema, in a fixed order.
pub fn published() -> Vec<PublishedSchema> {
    vec![
        PublishedSchema {
            name: "results",
            describes: "the results file of `conform run --json`",
            schema: schema_for!(crate::results::RunResults),
        },
        PublishedSchema {
            name: "perf",
            describes: "the perf file of `conform perf record` and `conform run --perf`",
            schema: schema_for!(crate::perf::PerfFile),
        },
        PublishedSchema {
            name: "compare",
            describes: "the comparison of `conform perf compare --json` and `conform perf history gate --json`",
            schema: schema_for!(crate::compare::Comparison),
        },
        PublishedSchema {
            name: "adequacy",
            describes: "the adequacy report of `conform adequacy --json`",
            schema: schema_for!(crate::adequacy::AdequacyReport),
        },
        PublishedSchema {
            name: "fingerprint",
            describes: "the knob-by-knob fingerprint of `conform fingerprint --json`",
            schema: schema_for!(crate::fingerprint::Fingerprint),
        },
        PublishedSchema {
            name: "worker-message",
            describes: "one line a worker writes to its stdout (worker protocol)",
            schema: schema_for!(crate::protocol::WorkerMessage),
        },
        PublishedSchema {
            name: "harness-message",
            describes: "one line the harness writes to a worker's stdin (worker protocol)",
            schema: schema_for!(crate::protocol::HarnessMessage),
        },
    ]
}

/// The text of a published schema as committed: pretty JSON with a trailing newline.
pub fn render(schema: &Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("a schema is plain JSON");
    text.push('\n');
    text
}
