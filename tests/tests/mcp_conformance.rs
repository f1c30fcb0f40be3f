//! The official MCP conformance suite, both ways: `conformance server` against an agent whose skill holds the
//! suite's fixture tools, served by agentry's MCP server on loopback; `conformance client` driving agentry's
//! `McpClient` through the `mcp_conformance_client` binary. Scenarios agentry does not pass yet are listed, with
//! the reason, in `tests/conformance/expected-failures.yml`; the suite fails when an unlisted one fails or a listed
//! one starts passing.

use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry_tests::conformance::{Suite, expected_failures, fixture};
use serde_json::Value;
use std::process::Output;

fn report(what: &str, output: &Output) {
    println!("--- {what}: stdout\n{}", String::from_utf8_lossy(&output.stdout));
    println!("--- {what}: stderr\n{}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_passes_the_suite_but_the_listed_scenarios() {
    let Some(suite) = Suite::installed() else { return };
    let runtime = Runtime::builder().skill(fixture()).build();
    let agent = AgentId::new("conformance").unwrap();
    let served = runtime.spawn((), SpawnOptions { id: Some(agent.clone()), ..Default::default() }).await.unwrap();
    served.mount(&"conformance".parse().unwrap(), Value::Null).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            agentry_skills::mcp::serve_http(&runtime, &agent, listener, async move {
                let _ = stopped.await;
            })
            .await
        })
    };
    let mut command = suite.command();
    command.args(["server", "--url", &url, "--expected-failures"]).arg(expected_failures());
    let output = tokio::process::Command::from(command).output().await.expect("the suite runs");
    report("conformance server", &output);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    assert!(output.status.success(), "the server conformance run failed ({}); see its report above", output.status);
}

#[tokio::test]
async fn the_client_passes_the_core_suite_but_the_listed_scenarios() {
    let Some(suite) = Suite::installed() else { return };
    let output = run_client(&suite, ["--suite", "core"]).await;
    report("conformance client", &output);
    // `sse-retry` measures wall time: the client must reconnect 450 to 1,000 ms after the stream closes, as the
    // server's retry hint says. With the other scenarios' processes running beside it on a two-core machine, it
    // can miss that window without anything being wrong; failing alone, it is run again by itself, and must pass.
    if !output.status.success() && unexpected_failures(&String::from_utf8_lossy(&output.stdout)) == ["sse-retry"] {
        let alone = run_client(&suite, ["--scenario", "sse-retry"]).await;
        report("conformance client, sse-retry run again alone", &alone);
        assert!(alone.status.success(), "sse-retry failed again, alone ({}); see its report above", alone.status);
        return;
    }
    assert!(output.status.success(), "the client conformance run failed ({}); see its report above", output.status);
}

/// Runs the suite's client scenarios that `which` names against our client, with the listed failures expected.
async fn run_client(suite: &Suite, which: [&str; 2]) -> std::process::Output {
    let mut command = suite.command();
    command
        .arg("client")
        .args(which)
        .args(["--command", env!("CARGO_BIN_EXE_mcp_conformance_client")])
        .arg("--expected-failures")
        .arg(expected_failures());
    tokio::process::Command::from(command).output().await.expect("the conformance suite runs")
}

/// The scenarios the suite's report lists as failing and not expected to.
fn unexpected_failures(report: &str) -> Vec<&str> {
    report
        .lines()
        .skip_while(|line| !line.contains("Unexpected failures (not in baseline)"))
        .skip(1)
        .map_while(|line| line.trim_start().strip_prefix("✗ "))
        .map(str::trim)
        .collect()
}

#[test]
fn the_unexpected_failures_are_read_from_the_report() {
    let report = "Total: 233 passed, 1 failed\n\n\u{1b}[31mUnexpected failures (not in baseline):\u{1b}[0m\n  ✗ sse-retry\n  ✗ tools_call\n\n\u{1b}[31mUnexpected failures detected\u{1b}[0m";
    assert_eq!(unexpected_failures(report), ["sse-retry", "tools_call"]);
    assert!(unexpected_failures("Total: 234 passed, 0 failed").is_empty());
}
