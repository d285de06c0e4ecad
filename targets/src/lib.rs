//! conform-targets: implementations under test.
