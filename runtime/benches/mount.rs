//! Mounting and tool descriptors, measured.
//!
//! `mount_unmount/N`: mount and then unmount a 4-action skill on an agent that already has N skills mounted.
//! `baseline_table/N`: the same four inserts and removes on a bare `BTreeSet` holding N×4 action ids — what a
//! hand-rolled action table costs with no rules checked — so the report can give the rules' overhead as a ratio.
//! `tools_for_agent/*`: describing 100 mounted actions in each format.

use agentry::action::{ActionSpec, DynAction};
use agentry::agent::AgentState;
use agentry::id::{ActionId, AgentId};
use agentry::policy::Policy;
use agentry::skill::{Catalog, Skill, mount, unmount};
use agentry::tool::{ToolFormat, tools_for_agent};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::hint::black_box;

fn action(id: &str) -> DynAction {
    let spec = ActionSpec::new(id, "Does one thing with a query and a limit.").unwrap().params_schema(json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": ["integer", "null"], "minimum": 1},
            "mode": {"type": "string", "enum": ["fast", "exact"]},
        },
        "required": ["query"],
    }));
    DynAction::new(spec, |params, _| Box::pin(async move { Ok(params) })).unwrap()
}

fn skill(name: &str) -> Skill {
    let mut builder = Skill::builder(name, "1.0.0");
    for verb in ["read", "write", "list", "delete"] {
        builder = builder.dyn_action(action(&format!("{name}.{verb}")));
    }
    builder.build().unwrap()
}

fn agent_with(n: usize) -> (AgentState<()>, Catalog) {
    let mut state = AgentState::new(AgentId::new("bench").unwrap(), ());
    let mut catalog = Catalog::new();
    for i in 0..n {
        let s = skill(&format!("bg{i}"));
        mount(&mut state, &s, &Value::Null, &Policy::default()).unwrap();
        catalog.insert(s);
    }
    (state, catalog)
}

fn mount_unmount(c: &mut Criterion) {
    let target = skill("target");
    let policy = Policy::default();
    let mut group = c.benchmark_group("mount_unmount");
    for n in [0usize, 10, 100] {
        let (mut state, _) = agent_with(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let registered = mount(&mut state, &target, &Value::Null, &policy).unwrap();
                let deregistered = unmount(&mut state, target.id()).unwrap();
                black_box((registered, deregistered))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("baseline_table");
    for n in [0usize, 10, 100] {
        let mut table: BTreeSet<ActionId> = (0..n * 4).map(|i| ActionId::new(format!("bg.a{i}")).unwrap()).collect();
        let ids: Vec<ActionId> = target.actions().iter().map(|a| a.spec().id.clone()).collect();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                for id in &ids {
                    table.insert(id.clone());
                }
                for id in &ids {
                    table.remove(id);
                }
                black_box(&table);
            })
        });
    }
    group.finish();
}

fn tools(c: &mut Criterion) {
    let (state, catalog) = agent_with(25);
    let mut group = c.benchmark_group("tools_for_agent");
    for (name, format) in [
        ("openai", ToolFormat::OpenAi),
        ("openai_strict", ToolFormat::OpenAiStrict),
        ("anthropic", ToolFormat::Anthropic),
        ("mcp", ToolFormat::Mcp),
    ] {
        group.bench_function(BenchmarkId::new("100_actions", name), |b| {
            b.iter(|| black_box(tools_for_agent(&state, &catalog, format).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, mount_unmount, tools);
criterion_main!(benches);
