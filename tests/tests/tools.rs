//! Tool descriptors for LLMs and MCP, from real typed actions mounted on an agent.

use agentry::action::{Action, ActionContext, ActionError, ActionSpec, Capability, Risk};
use agentry::agent::AgentState;
use agentry::id::{ActionId, AgentId};
use agentry::policy::Policy;
use agentry::skill::{Catalog, Skill, mount};
use agentry::tool::{ToolError, ToolFormat, tools_for_agent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How urgent a ticket is.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Priority {
    Low,
    High,
}

/// Where to send updates.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Contact {
    /// An email address.
    email: String,
    /// A phone number, if any.
    phone: Option<String>,
}

/// Files a support ticket.
#[derive(Debug, Deserialize, JsonSchema)]
struct FileTicket {
    /// What went wrong.
    title: String,
    /// How urgent it is.
    priority: Priority,
    /// Who to contact.
    contact: Contact,
    /// Labels to add.
    labels: Option<Vec<String>>,
    /// How many times it happened.
    #[serde(default)]
    count: u32,
}

impl Action for FileTicket {
    type Output = String;
    fn spec() -> ActionSpec {
        ActionSpec::new("support.file_ticket", "Files a support ticket.")
            .unwrap()
            .side_effects(true)
            .risk(Risk::High)
            .capability(Capability::NET)
    }
    async fn run(self, _ctx: ActionContext) -> Result<String, ActionError> {
        let labels = self.labels.unwrap_or_default().join(",");
        let Contact { email, phone } = self.contact;
        Ok(format!(
            "filed {} ({:?}, seen {}x, [{labels}]) for {email} {phone:?}",
            self.title, self.priority, self.count
        ))
    }
}

/// Looks a ticket up.
#[derive(Debug, Deserialize, JsonSchema)]
struct GetTicket {
    id: u64,
}

/// A ticket as stored.
#[derive(Debug, Serialize, JsonSchema)]
struct Ticket {
    id: u64,
    title: String,
}

impl Action for GetTicket {
    type Output = Ticket;
    fn spec() -> ActionSpec {
        ActionSpec::new("support.get_ticket", "Looks a ticket up.").unwrap().idempotent(true)
    }
    async fn run(self, _ctx: ActionContext) -> Result<Ticket, ActionError> {
        Ok(Ticket { id: self.id, title: String::new() })
    }
}

fn support() -> Skill {
    Skill::builder("support", "1.0.0").action::<FileTicket>().action::<GetTicket>().build().unwrap()
}

fn agent_with_support() -> (AgentState<()>, Catalog) {
    let mut state = AgentState::new(AgentId::new("helpdesk").unwrap(), ());
    mount(&mut state, &support(), &Value::Null, &Policy::default()).unwrap();
    (state, [support()].into_iter().collect())
}

#[test]
fn strict_openai_schema_closes_every_object_and_makes_optional_fields_nullable() {
    let (state, catalog) = agent_with_support();
    let tools = tools_for_agent(&state, &catalog, ToolFormat::OpenAiStrict).unwrap();
    assert_eq!(
        tools[0],
        json!({
            "type": "function",
            "function": {
                "name": "support__file_ticket",
                "description": "Files a support ticket.",
                "strict": true,
                "parameters": {
                    "title": "FileTicket",
                    "description": "Files a support ticket.",
                    "type": "object",
                    "properties": {
                        "title": {"description": "What went wrong.", "type": "string"},
                        "priority": {"description": "How urgent it is.", "type": "string", "enum": ["low", "high"]},
                        "contact": {
                            "description": "Who to contact.",
                            "type": "object",
                            "properties": {
                                "email": {"description": "An email address.", "type": "string"},
                                "phone": {"description": "A phone number, if any.", "type": ["string", "null"]},
                            },
                            "required": ["email", "phone"],
                            "additionalProperties": false,
                        },
                        "labels": {"description": "Labels to add.", "type": ["array", "null"], "items": {"type": "string"}},
                        "count": {"description": "How many times it happened.", "type": ["integer", "null"], "minimum": 0},
                    },
                    "required": ["title", "priority", "contact", "labels", "count"],
                    "additionalProperties": false,
                }
            }
        })
    );
}

#[test]
fn plain_openai_and_anthropic_keep_the_schema_minus_its_dialect_marker() {
    let (state, catalog) = agent_with_support();
    let openai = tools_for_agent(&state, &catalog, ToolFormat::OpenAi).unwrap();
    let params = &openai[0]["function"]["parameters"];
    assert!(params.get("$schema").is_none());
    assert_eq!(params["required"], json!(["title", "priority", "contact"]));
    assert_eq!(params["properties"]["count"]["default"], json!(0));
    let anthropic = tools_for_agent(&state, &catalog, ToolFormat::Anthropic).unwrap();
    assert_eq!(anthropic[1]["name"], "support__get_ticket");
    assert_eq!(anthropic[1]["input_schema"]["required"], json!(["id"]));
    assert_eq!(ActionId::from_tool_name("support__get_ticket").unwrap(), "support.get_ticket");
}

#[test]
fn mcp_annotations_follow_the_contract() {
    let (state, catalog) = agent_with_support();
    let tools = tools_for_agent(&state, &catalog, ToolFormat::Mcp).unwrap();
    assert_eq!(tools[0]["name"], "support.file_ticket");
    assert_eq!(
        tools[0]["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
    );
    // A string output's schema is wrapped, as the output is, in an object with the one property `result`.
    assert_eq!(tools[0]["outputSchema"]["properties"]["result"]["type"], "string", "{}", tools[0]);
    assert_eq!(
        (tools[0]["outputSchema"]["type"].clone(), tools[0]["outputSchema"]["x-agentry-wrapped"].clone()),
        (json!("object"), json!(true))
    );
    assert_eq!(
        tools[1]["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
    );
    assert_eq!(tools[1]["outputSchema"]["required"], json!(["id", "title"]));
}

#[test]
fn only_mounted_actions_are_offered_and_unknown_skills_are_reported() {
    let state = AgentState::new(AgentId::new("empty").unwrap(), ());
    assert!(tools_for_agent(&state, &Catalog::new(), ToolFormat::OpenAi).unwrap().is_empty());
    let (state, _) = agent_with_support();
    let err = tools_for_agent(&state, &Catalog::new(), ToolFormat::Mcp).unwrap_err();
    assert!(matches!(err, ToolError::UnknownSkill(ref s) if *s == "support"));
    assert!(err.to_string().contains("not in the catalog"));
}

/// A list of structs is wrapped so that a real output, wrapped, validates against the published schema; where
/// the schema uses definitions (`$ref` to `#/$defs/...`), they are lifted to the wrapper's root, where the refs
/// resolve.
#[test]
fn a_wrapped_output_schema_keeps_its_definitions_resolvable() {
    use agentry::skill::SkillDefinition;
    let valid = |schema: &Value, output: Value| {
        let validator = jsonschema::validator_for(schema).expect("the wrapped schema compiles");
        let errors: Vec<String> = validator.iter_errors(&output).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?} against {schema}");
    };
    let fs = agentry_skills::Files::skill().unwrap();
    let list = fs.actions().iter().find(|a| a.spec().id.as_str() == "fs.list").unwrap().spec().clone();
    let schema = agentry::tool::mcp(&list)["outputSchema"].clone();
    assert_eq!(schema["x-agentry-wrapped"], true, "{schema}");
    valid(&schema, json!({"result": [{"path": "a.txt", "kind": "file", "size": 3}]}));

    let with_refs = json!({
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}}, "required": ["next"]}},
    });
    let spec = agentry::action::ActionSpec::new("x.chain", "A chain.").unwrap().output_schema(with_refs);
    let schema = agentry::tool::mcp(&spec)["outputSchema"].clone();
    assert!(schema["$defs"]["Node"].is_object(), "definitions at the root: {schema}");
    valid(&schema, json!({"result": [{"next": {"next": null}}]}));
}
