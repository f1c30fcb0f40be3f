//! Fuzzing of every place where bytes from outside become agentry values: signal JSON, effect JSON, the params of
//! real actions (validated, then decoded into their typed params and run), and the MCP server's `tools/call`
//! arguments, sent as JSON-RPC over a real connection to the real server. No input may panic.
//!
//! These are `proptest` properties over arbitrary bytes and arbitrary JSON, not `cargo fuzz` targets: cargo-fuzz
//! needs a nightly toolchain, and this project builds with stable only. Each property runs a CI-sized number of
//! cases; set `AGENTRY_FUZZ_CASES` for a longer run by hand (say `AGENTRY_FUZZ_CASES=200000`).

use agentry::action::{Capability, DynAction};
use agentry::driver::ContextBuilder;
use agentry::effect::Effect;
use agentry::id::{ActionId, AgentId};
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::SkillDefinition;
use agentry_skills::{Files, Memory};
use agentry_testkit::demo::Arithmetic;
use agentry_tests::Operated;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How many cases each property runs: `AGENTRY_FUZZ_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("AGENTRY_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

fn config(default: u32) -> Config {
    Config { cases: cases(default), failure_persistence: None, ..Config::default() }
}

/// Any JSON, with the shapes and the edge values decoders trip on: huge and negative numbers, floats, deep
/// nesting, odd strings.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        "[a-z._*-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("0"),
            Just("-1"),
            Just("1e400"),
            Just("2026-13-45T25:61:00Z"),
            Just("00000000-0000-0000-0000-000000000000")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A JSON object shaped like `fields` names, with each field's value either plausible or anything.
fn shaped(fields: &'static [(&'static str, &'static str)]) -> impl Strategy<Value = Value> {
    let values: Vec<_> = fields
        .iter()
        .map(|(key, plausible)| {
            let plausible: Value = serde_json::from_str(plausible).expect("a plausible value");
            (Just(*key), prop_oneof![Just(plausible), json_value()], any::<bool>())
        })
        .collect();
    values.prop_map(|fields| {
        Value::Object(fields.into_iter().filter(|(_, _, keep)| *keep).map(|(k, v, _)| (k.to_owned(), v)).collect())
    })
}

#[test]
fn signal_json_never_panics_and_what_decodes_round_trips() {
    let signal_fields: &'static [(&str, &str)] = &[
        ("id", r#""01a20719-1447-7397-afdd-242e745087b3""#),
        ("kind", r#""order.placed""#),
        ("source", r#""app""#),
        ("subject", r#""o-1""#),
        ("time", r#""2026-01-01T00:00:00Z""#),
        ("data", r#"{"a": 1}"#),
        ("correlation_id", r#""01a20719-1447-7397-afdd-242e745087b3""#),
        ("causation_id", r#""01a20719-1447-7397-afdd-242e745087b3""#),
    ];
    let input = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        shaped(signal_fields).prop_map(|v| serde_json::to_vec(&v).expect("json")),
    ];
    TestRunner::new(config(4000))
        .run(&input, |bytes| {
            if let Ok(signal) = serde_json::from_slice::<Signal>(&bytes) {
                let again: Signal = serde_json::from_str(&serde_json::to_string(&signal).expect("it serializes"))
                    .expect("what decoded once decodes again");
                prop_assert_eq!(&again, &signal);
                // A decoded outcome signal's typed view is read without panicking too.
                let _ = signal.outcome();
            }
            Ok(())
        })
        .expect("no signal input panics or fails to round trip");
}

#[test]
fn effect_json_never_panics_and_what_decodes_round_trips() {
    let effect_fields: &'static [(&str, &str)] = &[
        ("effect", r#""run""#),
        ("action", r#""arithmetic.add""#),
        ("params", r#"{"a": 1, "b": 2}"#),
        ("to", r#""agent""#),
        ("id", r#""child""#),
        ("key", r#""k""#),
        ("after", "5"),
        ("agent", r#""probe""#),
        ("init", "{}"),
        ("policy", r#"{"grants": "all"}"#),
        ("reason", r#""bye""#),
        ("data", "null"),
    ];
    let kinds = prop_oneof![
        prop::sample::select(vec![
            "register_action",
            "deregister_action",
            "run",
            "emit",
            "reply",
            "schedule",
            "cancel",
            "spawn_agent",
            "stop_child",
            "stop",
        ])
        .prop_map(str::to_owned),
        ".{0,8}",
    ];
    let input = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (kinds, shaped(effect_fields)).prop_map(|(kind, mut v)| {
            v["effect"] = json!(kind);
            serde_json::to_vec(&v).expect("json")
        }),
    ];
    TestRunner::new(config(4000))
        .run(&input, |bytes| {
            if let Ok(effect) = serde_json::from_slice::<Effect>(&bytes) {
                let again: Effect = serde_json::from_str(&serde_json::to_string(&effect).expect("it serializes"))
                    .expect("what decoded once decodes again");
                prop_assert_eq!(&again, &effect);
            }
            Ok(())
        })
        .expect("no effect input panics or fails to round trip");
}

/// Validates arbitrary params against real actions of the standard skills, and runs the ones that pass (the
/// typed decoding is where coercion bugs hide); the `fs` actions run in a temporary drive.
#[test]
fn real_actions_never_panic_on_any_params() {
    let skills = [Arithmetic::skill(), Files::skill(), Memory::skill()];
    let actions: Vec<DynAction> =
        skills.into_iter().flat_map(|s| s.expect("a standard skill").actions().to_vec()).collect();
    let drive = tempfile::tempdir().expect("a temporary drive");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let names: Vec<&'static str> = vec![
        "arithmetic.add",
        "arithmetic.divide",
        "fs.read",
        "fs.write",
        "fs.list",
        "fs.move",
        "fs.delete",
        "memory.recall",
    ];
    let input = (prop::sample::select(names), json_value());
    TestRunner::new(config(2000))
        .run(&input, |(name, params)| {
            let action = actions.iter().find(|a| a.spec().id.as_str() == name).expect("a real action");
            if action.validate(&params).is_ok() {
                let ctx =
                    ContextBuilder::new(AgentId::new("fuzz").expect("an id"), ActionId::new(name).expect("an id"))
                        .drive(drive.path())
                        .policy(Policy::default().grant(Capability::FS))
                        .build();
                // Any result is fine; a panic is not (the test harness reports it as a failure).
                let _ = runtime.block_on(async {
                    tokio::time::timeout(std::time::Duration::from_secs(5), action.invoke(params, ctx)).await
                });
            }
            Ok(())
        })
        .expect("no params panic a real action");
}

/// One JSON-RPC line to the server.
async fn send(writer: &mut (impl AsyncWriteExt + Unpin), message: &Value) {
    let mut line = serde_json::to_vec(message).expect("json");
    line.push(b'\n');
    writer.write_all(&line).await.expect("the server reads");
    writer.flush().await.expect("the server reads");
}

/// The server's answer to request `id`, skipping notifications.
async fn answer(lines: &mut tokio::io::Lines<impl tokio::io::AsyncBufRead + Unpin>, id: u64) -> Value {
    let read = async {
        loop {
            let line = lines.next_line().await.expect("the server writes").expect("the server is still there");
            let message: Value = serde_json::from_str(&line).expect("the server writes JSON");
            if message["id"] == json!(id) {
                return message;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), read).await.expect("the server answered in time")
}

#[test]
fn mcp_tools_call_arguments_never_panic_the_server() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let (op, mut writer, mut lines) = runtime.block_on(async {
        let skills = vec![Arithmetic::skill().unwrap(), Files::skill().unwrap()];
        let op = Operated::start(skills, Policy::default().grant(Capability::FS), &[]).await;
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_reader, server_writer) = tokio::io::split(server);
        let (served, agent) = (op.runtime.clone(), op.agent.id().clone());
        tokio::spawn(async move { agentry_skills::mcp::serve_io(&served, &agent, server_reader, server_writer).await });
        let (client_reader, mut writer) = tokio::io::split(client);
        let mut lines = BufReader::new(client_reader).lines();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}});
        send(&mut writer, &init).await;
        assert!(answer(&mut lines, 0).await["result"].is_object(), "the server initialized");
        send(&mut writer, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        (op, writer, lines)
    });
    let tools = prop_oneof![
        prop::sample::select(vec!["arithmetic.add", "arithmetic.divide", "fs.write", "fs.read", "fs.list"])
            .prop_map(str::to_owned),
        ".{0,20}",
    ];
    let arguments = prop_oneof![
        json_value(),
        prop::collection::btree_map("[a-z_]{1,8}", json_value(), 0..5).prop_map(|m| json!(m))
    ];
    let next_id = std::cell::Cell::new(0u64);
    let connection = std::cell::RefCell::new((&mut writer, &mut lines));
    TestRunner::new(config(300))
        .run(&(tools, arguments), |(tool, arguments)| {
            let id = next_id.get() + 1;
            next_id.set(id);
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                              "params": {"name": tool, "arguments": arguments}});
            let mut connection = connection.borrow_mut();
            let (writer, lines) = &mut *connection;
            let reply = runtime.block_on(async {
                send(*writer, &call).await;
                answer(*lines, id).await
            });
            prop_assert!(reply["result"].is_object() || reply["error"].is_object(), "{}", reply);
            Ok(())
        })
        .expect("every call is answered with a result or an error");
    let _ = connection.into_inner();
    let id = next_id.get();
    // The server (and the agent behind it) still works after all that.
    let good = json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
                      "params": {"name": "arithmetic.add", "arguments": {"a": 2, "b": 3}}});
    let reply = runtime.block_on(async {
        send(&mut writer, &good).await;
        answer(&mut lines, id + 1).await
    });
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    drop(op);
}
