//! A run's progress on the event stream: announced as it goes, a note for each hundredth it moves (or a new
//! message), so a run that reports at every step does not flood the stream.

use agentry::action::{ActionSpec, DynAction, PROGRESS};
use agentry::events::EventKind;
use agentry::id::AgentId;
use agentry::runtime::{Runtime, SpawnOptions};
use agentry::skill::Skill;
use serde_json::Value;

fn counting() -> Skill {
    let spec = ActionSpec::new("work.count", "Counts to a thousand, reporting each step.").expect("an id");
    let count = DynAction::new(spec, |_, ctx| {
        Box::pin(async move {
            for step in 0..=1000u32 {
                let message = (step == 500).then(|| "halfway".to_owned());
                ctx.progress(f64::from(step) / 1000.0, message);
            }
            Ok(Value::Null)
        })
    })
    .expect("an action");
    Skill::builder("work", "1.0.0").dyn_action(count).build().expect("a skill")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_announced_a_note_a_hundredth_and_ends_at_one() {
    let runtime = Runtime::builder().skill(counting()).build();
    let id = AgentId::new("counter").expect("an id");
    let opts = SpawnOptions { id: Some(id.clone()), policy: agentry::policy::Policy::trusted(), ..Default::default() };
    let agent = runtime.spawn((), opts).await.expect("spawned");
    agent.mount(&agentry::id::SkillId::new("work").expect("an id"), Value::Null).await.expect("mounted");
    let mut events = runtime.events();
    let outcome = runtime.invoke(&id, "work.count", Value::Null).await.expect("ran");
    assert!(outcome.status == agentry::action::OutcomeStatus::Completed, "{outcome:?}");
    let mut notes = Vec::new();
    loop {
        let event = events.recv().await.expect("the stream goes on");
        match event.kind {
            EventKind::ActionNote { topic, data, .. } if topic == PROGRESS => notes.push(data),
            EventKind::ActionCompleted { .. } => break,
            _ => {}
        }
    }
    let fractions: Vec<f64> = notes.iter().filter_map(|n| n["fraction"].as_f64()).collect();
    assert!((101..=103).contains(&notes.len()), "a note a hundredth, and the message: {}", notes.len());
    assert_eq!(fractions.first(), Some(&0.0));
    assert_eq!(fractions.last(), Some(&1.0), "the end is announced");
    assert!(notes.iter().any(|n| n["message"] == "halfway"), "a new message is announced");
    // Between two notes with the same message, it moved by a hundredth at least (or reached the end).
    let close = notes.windows(2).filter(|w| {
        let (a, b) = (w[0]["fraction"].as_f64().unwrap_or(0.0), w[1]["fraction"].as_f64().unwrap_or(0.0));
        w[0]["message"] == w[1]["message"] && b - a < 0.0099 && b < 1.0
    });
    assert_eq!(close.count(), 0, "{fractions:?}");
}
