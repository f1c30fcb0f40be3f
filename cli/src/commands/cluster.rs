//! `agentry cluster status`: the nodes of a cluster and what waits in its inboxes, as PostgreSQL has them.

use crate::error::CliError;
use agentry_cluster::ClusterStatus;
use std::fmt::Write as _;
use std::process::ExitCode;

/// Reads the cluster's status from the database whose connection string is in the environment variable
/// `postgres_env`, and prints it (as text, or as JSON).
pub async fn status(postgres_env: &str, fullest: u32, json: bool) -> Result<ExitCode, CliError> {
    let url = std::env::var(postgres_env).map_err(|_| {
        CliError::Usage(format!(
            "the environment variable `{postgres_env}` is not set; expected PostgreSQL's connection string in it \
             (for example `host=db.internal user=agentry dbname=agents`)"
        ))
    })?;
    let status = ClusterStatus::read(&url, fullest).await.map_err(|e| CliError::Cluster(e.to_string()))?;
    if json {
        let text = serde_json::to_string_pretty(&status).map_err(|e| CliError::Cluster(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", text(&status));
    }
    Ok(ExitCode::SUCCESS)
}

/// The status as a person reads it.
fn text(status: &ClusterStatus) -> String {
    let mut out = String::new();
    let alive = status.nodes.iter().filter(|node| node.alive).count();
    let _ = writeln!(out, "nodes: {} ({alive} alive)", status.nodes.len());
    for node in &status.nodes {
        let seen = match node.seen_until {
            Some(until) if node.alive => format!("alive, heartbeat good for {}", since(until - status.at)),
            Some(until) => format!("gone, heartbeat ran out {} ago", since(status.at - until)),
            None => "never said it was alive".to_owned(),
        };
        let wire = node.wire.as_deref().map(|wire| format!(", listens at {wire}")).unwrap_or_default();
        let expired = match node.expired {
            0 => String::new(),
            n => format!(" ({n} ran out, waiting for a node to take them over)"),
        };
        let _ = writeln!(out, "  {}: {seen}{wire}; {} leases{expired}", node.name, node.leases);
    }
    let _ = writeln!(out, "leases: {} ({} ran out)", status.leases, status.expired);
    let _ = writeln!(out, "inboxes: {} signals waiting for {} agents", status.waiting, status.waiting_agents);
    for backlog in &status.fullest {
        let node = backlog.node.as_deref().map(|node| format!(" (lease of {node})")).unwrap_or_default();
        let _ = writeln!(out, "  {}: {} waiting{node}", backlog.agent, backlog.signals);
    }
    out
}

/// A span of time, to the tenth of a second.
fn since(span: chrono::TimeDelta) -> String {
    format!("{:.1}s", span.num_milliseconds().max(0) as f64 / 1000.0)
}
