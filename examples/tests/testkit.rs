//! The example agents under agentry-testkit: their properties over random signals, and their stories driven
//! step by step with the pure harness (no runtime, no files, no database: the test plays every action).

use agentry::action::{ActionError, Capability};
use agentry::policy::Policy;
use agentry::skill::Catalog;
use agentry_examples::calculator::Calculator;
use agentry_examples::librarian::Librarian;
use agentry_testkit::{AgentCheck, AgentHarness, check_agent};
use serde_json::json;

#[test]
fn the_calculator_is_sound_on_random_signals() {
    check_agent(Calculator::default()).expect("the calculator's properties hold");
    // Calculations shaped like real ones, so the runs are asked for and the counter moves.
    let calculation = agentry_testkit::schema::values(&json!({
        "type": "object",
        "properties": {
            "op": {"enum": ["add", "subtract", "multiply", "divide", "modulo"]},
            "a": {"type": "number"},
            "b": {"type": "number"},
        },
        "required": ["op", "a", "b"],
    }))
    .expect("a schema the kit draws from");
    AgentCheck::new(Calculator::default())
        .signal_kinds(["calculate"])
        .data(calculation)
        .run()
        .expect("the calculator's properties hold on calculations");
}

#[test]
fn the_librarian_is_sound_on_random_signals() {
    check_agent(Librarian::default()).expect("the librarian's properties hold");
}

#[test]
fn the_calculator_answers_with_the_runs_output_or_its_error() {
    let mut calculator = AgentHarness::new(Calculator::default()).expect("the calculator starts");
    calculator.send("calculate", json!({"op": "add", "a": 1, "b": 2})).expect("handled");
    assert_eq!(calculator.assert_run("arithmetic.add").params, json!({"a": 1, "b": 2}));
    calculator.complete("arithmetic.add", json!(3.0)).expect("the run waits");
    assert_eq!(calculator.assert_replied(), &json!({"result": 3.0}));

    calculator.send("calculate", json!({"op": "divide", "a": 1, "b": 0})).expect("handled");
    calculator.fail("arithmetic.divide", ActionError::validation("cannot divide by zero")).expect("the run waits");
    assert_eq!(calculator.assert_replied(), &json!({"error": "invalid params: cannot divide by zero"}));
    assert_eq!(calculator.domain().asked, 2);

    calculator.send("calculate", json!({"op": "modulo", "a": 1, "b": 2})).expect("handled");
    calculator.assert_quiet();
}

#[test]
fn the_librarian_learns_a_file_and_answers_from_memory() {
    // Without the capabilities its skills need, the gate refuses the first run and the call is answered.
    let mut refused = AgentHarness::new(Librarian::default()).expect("the librarian starts");
    refused.send("learn", json!(null)).expect("handled");
    assert!(refused.runs().is_empty(), "{}", refused.describe());
    assert_eq!(refused.assert_replied(), &json!({"learned": 0, "skipped": 1}));

    let policy = Policy::default().grant(Capability::FS).grant(Capability::MEMORY);
    let mut librarian = AgentHarness::with(Librarian::default(), &Catalog::new(), &policy).expect("it starts");
    librarian.send("learn", json!(null)).expect("handled");
    // The outputs played here are the actions' real output shapes: the harness checks them as the server does.
    let listed = json!([{"kind": "file", "path": "sky.txt", "size": 16}, {"kind": "dir", "path": "old", "size": 0}]);
    librarian.complete("fs.list", listed).expect("listed");
    assert_eq!(librarian.assert_run("fs.read").params, json!({"path": "sky.txt"}));
    assert_eq!(librarian.runs().len(), 1, "only the text file is read");
    librarian
        .complete("fs.read", json!({"path": "sky.txt", "content": "sky | is | blue\n# a comment\nnot a fact\n"}))
        .expect("read");
    let memorize = librarian.assert_run("memory.memorize");
    assert_eq!(memorize.params["object"], json!("blue"));
    let fact = json!({
        "id": 1, "subject": "sky", "predicate": "is", "object": "blue", "confidence": 1.0, "source": "sky.txt",
        "kind": "semantic", "valid_from": "2026-01-01T00:00:00Z", "valid_until": null,
        "recorded_at": "2026-01-01T00:00:00Z", "recorded_until": null, "archived": false,
    });
    librarian
        .complete("memory.memorize", json!({"fact": fact, "closed": [], "already_known": false}))
        .expect("memorized");
    assert_eq!(librarian.assert_replied(), &json!({"learned": 1, "skipped": 1}));
    assert!(librarian.runs().is_empty());

    librarian.send("ask", json!({"question": "sky"})).expect("handled");
    librarian.complete("memory.recall", json!([fact])).expect("recalled");
    assert_eq!(librarian.assert_replied()["answer"], json!("sky is blue"));

    // An output that breaks the action's output schema fails the run, as live: the call is answered with it.
    librarian.send("ask", json!({"question": "sky"})).expect("handled");
    librarian.complete("memory.recall", json!([{"subject": "sky"}])).expect("recalled");
    assert!(librarian.assert_replied()["error"].as_str().is_some_and(|e| e.contains("output schema")));
}
