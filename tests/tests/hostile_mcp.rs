//! A hostile MCP server (a real child process on the official Python SDK) serves schemas built to stall or
//! crash the client that compiles them: a validation bomb, a `$ref` cycle, a remote `$ref`, a giant schema, one
//! nested 40 deep, in another mode 5,000 tools, and in a third a schema nested 300 deep (past what the JSON
//! reader takes: the whole list is unreadable). Attaching it gives typed refusals (the hostile tools
//! skipped with the reason, the list refused), never a stalled agent or a dead process, and its honest tool
//! still works. The attach-and-validate path is fuzzed with generated hostile schemas too.

use agentry::policy::Policy;
use agentry_skills::mcp::{McpClient, McpError, McpServer};
use agentry_tests::Operated;
use proptest::prelude::*;
use serde_json::{Value, json};

fn hostile(mode: &str) -> Option<McpServer> {
    let python = agentry_tests::python_sdk::python()?;
    let script = agentry_tests::python_sdk::script("hostile_server.py");
    Some(
        McpServer::stdio("hostile", python.to_string_lossy(), [script.to_string_lossy().into_owned(), mode.to_owned()])
            .trusted(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_schemas_are_refused_when_the_server_is_attached() {
    let Some(server) = hostile("schemas") else { return };
    let client = tokio::time::timeout(agentry_tests::CALL, McpClient::connect(server))
        .await
        .expect("attaching never stalls")
        .expect("the server connects");
    let mut skipped: Vec<(String, String)> = client.skipped().into_iter().map(|s| (s.tool, s.reason)).collect();
    skipped.sort();
    let names: Vec<&str> = skipped.iter().map(|(tool, _)| tool.as_str()).collect();
    assert_eq!(names, ["bomb", "cycle", "deep", "giant", "remote"], "{skipped:#?}");
    for (tool, reason) in &skipped {
        let expected = match tool.as_str() {
            "bomb" => "costs",
            "cycle" => "cycle",
            "deep" => "levels deep",
            "giant" => "bytes",
            _ => "outside itself",
        };
        assert!(reason.contains("input schema is refused") && reason.contains(expected), "{tool}: {reason}");
    }
    // The honest tool works, through an agent.
    let policy = Policy::default().grant(agentry::action::Capability::NET).approval_at(None);
    let op = Operated::start(vec![], policy, &[]).await;
    client.attach(&op.runtime).unwrap();
    op.agent.mount(client.skill().id(), Value::Null).await.unwrap();
    assert_eq!(op.output("mcp.hostile.echo", json!({"text": "still here"})).await, json!("still here"));
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_too_many_tools_is_refused_with_a_typed_error() {
    let Some(server) = hostile("many") else { return };
    let connected = tokio::time::timeout(agentry_tests::CALL, McpClient::connect(server)).await;
    let Err(refused) = connected.expect("attaching never stalls") else { panic!("5,001 tools are refused") };
    assert!(
        matches!(&refused, McpError::ListTools { message, .. } if message.contains("more than 1000 tools")),
        "{refused}"
    );
}

/// A tool list the JSON reader refuses (a schema 300 levels deep) is a typed error within the connect timeout,
/// not a crash (a reader without a depth limit would overflow its stack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_tool_list_is_a_typed_error() {
    let Some(server) = hostile("abyss") else { return };
    let server = server.connect_timeout(std::time::Duration::from_secs(5));
    let Err(refused) = McpClient::connect(server).await else { panic!("an unreadable list is refused") };
    assert!(matches!(&refused, McpError::ListTools { .. }), "{refused}");
}

/// A server that asks 50 elicitations during one call gets at most 8 through to the agent (each an approval
/// run on it, answered here by policy); the rest are declined at once, and nothing is left waiting after the
/// call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_elicitations_are_bounded_per_call() {
    let Some(server) = hostile("elicit") else { return };
    let client = McpClient::connect(server).await.expect("the server connects");
    let policy = Policy::default().grant(agentry::action::Capability::NET).approval_at(None);
    let op = Operated::start(vec![], policy, &[]).await;
    client.attach(&op.runtime).unwrap();
    op.agent.mount(client.skill().id(), Value::Null).await.unwrap();
    let counts = op.output("mcp.hostile.nag", json!({})).await;
    let counts: Value = serde_json::from_str(counts.as_str().expect("the counts as text")).unwrap();
    assert_eq!(counts, json!({"accept": 8, "decline": 42, "cancel": 0, "error": 0}), "{counts}");
    let runs = op.runtime.store().query(&agentry::store::RunQuery {
        action: Some("mcp.hostile.elicitation".parse().unwrap()),
        ..Default::default()
    });
    assert_eq!(runs.len(), 8, "each elicitation let through is one run of the agent");
    client.close();
}

/// A hostile schema: `$ref`s into shared definitions, `allOf`/`anyOf`/`not` mixed in, cycles possible.
fn hostile_schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "number"})),
        Just(json!(true)),
        (0..6usize).prop_map(|i| json!({"$ref": format!("#/$defs/d{i}")})),
    ];
    let node = leaf.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..4).prop_map(|all| json!({"allOf": all})),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(|any| json!({"anyOf": any})),
            inner.clone().prop_map(|not| json!({"not": not})),
            inner.clone().prop_map(|items| json!({"type": "array", "items": items})),
            inner.prop_map(|x| json!({"type": "object", "properties": {"x": x}})),
        ]
    });
    (proptest::collection::vec(node.clone(), 6), node).prop_map(|(defs, top)| {
        let defs: serde_json::Map<String, Value> =
            defs.into_iter().enumerate().map(|(i, d)| (format!("d{i}"), d)).collect();
        json!({"type": "object", "properties": {"x": top}, "$defs": defs})
    })
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::from)
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            inner.prop_map(|x| json!({"x": x})),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever a server sends: the guard answers, and a schema it lets through compiles and checks (and is
    /// coerced toward) a value within a bounded time, off the test's thread so that a hang fails rather than
    /// stalls the suite.
    #[test]
    fn the_attach_and_validate_path_is_bounded_for_any_schema(schema in hostile_schema(), params in value()) {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::Builder::new().stack_size(8 * 1024 * 1024).spawn(move || {
            let verdict = agentry_skills::mcp::schema_guard::check(&schema);
            if verdict.is_ok() {
                let params = json!({"x": params});
                let coerced = agentry::action::coerce(&schema, params);
                if let Ok(validator) = jsonschema::validator_for(&schema) {
                    let _ = validator.is_valid(&coerced);
                }
            }
            let _ = done.send(verdict.is_ok());
        }).unwrap();
        let finished = finished.recv_timeout(std::time::Duration::from_secs(60));
        prop_assert!(finished.is_ok(), "the guard or a check it let through did not finish");
    }
}
