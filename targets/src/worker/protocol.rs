//! The worker protocol's messages, defined in `conform-metadata` (the stable types a worker
//! author's tooling can depend on) and re-exported here where the worker transport uses them.

pub use conform_metadata::protocol::{
    HarnessMessage, ResultStatus, WorkerInfo, WorkerMessage, PROTOCOL_VERSION,
};
