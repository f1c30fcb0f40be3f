//! What mounted skills offer besides tools, as MCP's JSON: their prompts (each skill's instructions among them)
//! and their resources, and the contents a resource's read action gives. Plain data both ways, so the SDK
//! adapter only decodes it.

use super::contract::content_blocks;
use agentry::action::Role;
use agentry::skill::{Prompt, PromptContent, PromptMessage, Resource, Skill};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The prompts of the mounted skills: each skill's instructions as `<skill>.instructions` (when it has any),
/// then the prompts it declares. Where two skills offer the same name, the skill first by id keeps it.
pub fn prompts(skills: &[Arc<Skill>]) -> Vec<Prompt> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for skill in skills {
        let instructions = (!skill.instructions().is_empty()).then(|| {
            let what = if skill.description().is_empty() { skill.name() } else { skill.description() };
            Prompt::new(
                format!("{}.instructions", skill.id()),
                format!("How to use the `{}` skill: {what}", skill.id()),
            )
            .user(skill.instructions())
        });
        for prompt in instructions.into_iter().chain(skill.prompts().iter().cloned()) {
            if seen.insert(prompt.name.clone()) {
                out.push(prompt);
            } else {
                tracing::warn!(prompt = %prompt.name, skill = %skill.id(), "two mounted skills offer a prompt of this name; the first keeps it");
            }
        }
    }
    out
}

/// The resources of the mounted skills, in order; where two offer the same URI, the first keeps it.
pub fn resources(skills: &[Arc<Skill>]) -> Vec<Resource> {
    let mut seen = BTreeSet::new();
    skills.iter().flat_map(|s| s.resources().iter()).filter(|r| seen.insert(r.uri.clone())).cloned().collect()
}

/// A prompt in `prompts/list`.
pub fn prompt_def(prompt: &Prompt) -> Value {
    let arguments: Vec<Value> = prompt
        .arguments
        .iter()
        .map(|a| json!({"name": a.name, "description": a.description, "required": a.required}))
        .collect();
    json!({"name": prompt.name, "description": prompt.description, "arguments": arguments})
}

/// A prompt's messages, as `prompts/get` answers them.
pub fn prompt_messages(messages: &[PromptMessage]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let content = match &m.content {
                PromptContent::Text(text) => json!({"type": "text", "text": text}),
                PromptContent::Block(block) => block.clone(),
            };
            json!({"role": role, "content": content})
        })
        .collect()
}

/// A resource in `resources/list` (one URI) or `resources/templates/list` (a template).
pub fn resource_def(resource: &Resource) -> Value {
    let key = if resource.is_template() { "uriTemplate" } else { "uri" };
    let mut def = json!({key: resource.uri, "name": resource.name, "description": resource.description});
    if let Some(mime) = &resource.mime_type {
        def["mimeType"] = json!(mime);
    }
    def
}

/// What reading `uri` gives, from the output of the resource's read action: content blocks become contents
/// (an embedded resource as it is, text as text, images and audio as blobs); text at the resource's `text_at`
/// pointer, or a string output, is one text content; any other output is its JSON text.
pub fn resource_contents(resource: &Resource, uri: &str, output: &Value) -> Vec<Value> {
    let mime = resource.mime_type.as_deref();
    let text = |text: &str, mime: Option<&str>| {
        let mut content = json!({"uri": uri, "text": text});
        if let Some(mime) = mime {
            content["mimeType"] = json!(mime);
        }
        content
    };
    if let Some(blocks) = content_blocks(output) {
        return blocks
            .iter()
            .map(|block| match block["type"].as_str() {
                Some("resource") => block["resource"].clone(),
                Some("image" | "audio") => json!({"uri": uri, "mimeType": block["mimeType"], "blob": block["data"]}),
                Some("resource_link") => text(block["uri"].as_str().unwrap_or_default(), Some("text/uri-list")),
                _ => text(block["text"].as_str().unwrap_or_default(), mime),
            })
            .collect();
    }
    let at = resource.text_at.as_deref().and_then(|pointer| output.pointer(pointer)).and_then(Value::as_str);
    match (at, output) {
        (Some(found), _) => vec![text(found, mime)],
        (None, Value::String(s)) => vec![text(s, mime)],
        (None, other) => vec![text(&other.to_string(), Some(mime.unwrap_or("application/json")))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::contract::{blob_resource_block, image_block};

    fn resource() -> Resource {
        Resource::new("t://{id}", "t", "t.read").unwrap().mime_type("text/plain")
    }

    #[test]
    fn outputs_become_contents() {
        let r = resource();
        assert_eq!(
            resource_contents(&r, "t://1", &json!("hi")),
            [json!({"uri": "t://1", "text": "hi", "mimeType": "text/plain"})]
        );
        assert_eq!(
            resource_contents(&r, "t://1", &json!({"a": 1})),
            [json!({"uri": "t://1", "text": "{\"a\":1}", "mimeType": "text/plain"})]
        );
        let r = r.text_at("/content");
        assert_eq!(resource_contents(&r, "t://1", &json!({"content": "x"}))[0]["text"], "x");
        let blob = blob_resource_block("t://1", "image/png", "AAAA");
        assert_eq!(resource_contents(&r, "t://1", &json!([blob])), [blob["resource"].clone()]);
        let image = image_block("BBBB", "image/png");
        assert_eq!(
            resource_contents(&r, "t://1", &json!([image])),
            [json!({"uri": "t://1", "mimeType": "image/png", "blob": "BBBB"})]
        );
    }

    #[test]
    fn instructions_are_a_prompt_and_the_first_skill_keeps_a_name() {
        let one = Skill::builder("one", "1.0.0")
            .description("First.")
            .instructions("Do it well.")
            .prompt(Prompt::new("shared", "From one."))
            .build()
            .unwrap();
        let two = Skill::builder("two", "1.0.0").prompt(Prompt::new("shared", "From two.")).build().unwrap();
        let offered = prompts(&[Arc::new(one), Arc::new(two)]);
        let names: Vec<&str> = offered.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["one.instructions", "shared"]);
        assert_eq!(offered[1].description, "From one.");
        assert_eq!(
            prompt_messages(&offered[0].messages),
            [json!({"role": "user", "content": {"type": "text", "text": "Do it well."}})]
        );
    }
}
