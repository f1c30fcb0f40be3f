//! Everything the pure layer hands across a boundary survives serde_json unchanged: signals, every effect,
//! and agent states with skills mounted.

use agentry::agent::AgentState;
use agentry::effect::{Effect, EffectKind, EffectMeta, Target};
use agentry::id::{ActionId, AgentId, SkillId};
use agentry::policy::Policy;
use agentry::signal::Signal;
use agentry::skill::mount;
use agentry_tests::{build_skill, catalog};
use chrono::{DateTime, Utc};
use proptest::prelude::*;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use std::fmt::Debug;
use std::time::Duration;
use uuid::Uuid;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) -> Result<(), TestCaseError> {
    let text = serde_json::to_string(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: T = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z é\"\\\\]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn dotted() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,5}(\\.[a-z][a-z0-9-]{0,5}){0,3}"
}

fn time() -> impl Strategy<Value = DateTime<Utc>> {
    (0i64..4_000_000_000, 0u32..1_000_000_000).prop_map(|(s, ns)| DateTime::from_timestamp(s, ns).unwrap())
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn signal() -> impl Strategy<Value = Signal> {
    (
        dotted(),
        "[a-z:/]{1,10}",
        prop::option::of("[a-z0-9-]{1,8}"),
        json_value(),
        uuid(),
        time(),
        prop::option::of((uuid(), uuid())),
    )
        .prop_map(|(kind, source, subject, data, id, time, cause)| {
            let mut b = Signal::builder(kind.as_str()).source(source).data(data).stamped(id, time);
            if let Some(subject) = subject {
                b = b.subject(subject);
            }
            if let Some((correlation, causation)) = cause {
                b = b.caused_by(correlation, causation, time);
            }
            b.build().unwrap()
        })
}

fn action_id() -> impl Strategy<Value = ActionId> {
    dotted().prop_map(|s| ActionId::new(s).unwrap())
}

fn agent_id() -> impl Strategy<Value = AgentId> {
    "[a-zA-Z0-9-]{1,12}".prop_map(|s| AgentId::new(s).unwrap())
}

fn effect_kind() -> impl Strategy<Value = EffectKind> {
    let target =
        prop_oneof![agent_id().prop_map(Target::Agent), Just(Target::Parent), "[a-z.]{1,8}".prop_map(Target::Topic),];
    let millis = (0u64..10_000_000).prop_map(Duration::from_millis);
    prop_oneof![
        action_id().prop_map(|action| EffectKind::RegisterAction { action }),
        action_id().prop_map(|action| EffectKind::DeregisterAction { action }),
        (action_id(), json_value()).prop_map(|(action, params)| EffectKind::Run { action, params }),
        (signal(), target).prop_map(|(signal, to)| EffectKind::Emit { signal, to }),
        (uuid(), json_value()).prop_map(|(to, data)| EffectKind::Reply { to, data }),
        ("[a-z0-9-]{1,8}", millis, signal()).prop_map(|(key, after, signal)| EffectKind::Schedule {
            if_missed: agentry::effect::IfMissed::FireLate,
            key,
            after,
            signal
        }),
        "[a-z0-9-]{1,8}".prop_map(|key| EffectKind::Cancel { key }),
        (agent_id(), "[a-z_]{1,8}", json_value()).prop_map(|(id, agent, init)| EffectKind::SpawnAgent {
            id,
            agent,
            init,
            policy: None
        }),
        agent_id().prop_map(|id| EffectKind::StopChild { id }),
        ".{0,12}".prop_map(|reason| EffectKind::Stop { reason }),
        (dotted(), json_value())
            .prop_map(|(skill, opts)| EffectKind::MountSkill { skill: SkillId::new(skill).unwrap(), opts }),
        dotted().prop_map(|skill| EffectKind::UnmountSkill { skill: SkillId::new(skill).unwrap() }),
    ]
}

fn effect() -> impl Strategy<Value = Effect> {
    let meta = (prop::option::of(dotted()), prop::collection::vec("[a-z]{1,5}", 0..3), prop::option::of(uuid()))
        .prop_map(|(skill, tags, cause)| EffectMeta { skill: skill.map(|s| SkillId::new(s).unwrap()), tags, cause });
    (effect_kind(), meta).prop_map(|(kind, meta)| Effect { kind, meta })
}

/// A user's domain state, with the shapes users write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Domain {
    name: String,
    counter: u64,
    notes: Vec<String>,
    last: Option<i64>,
}

fn agent_state() -> impl Strategy<Value = AgentState<Domain>> {
    let domain =
        ("[a-z ]{0,10}", any::<u64>(), prop::collection::vec("[a-z]{0,5}", 0..3), prop::option::of(any::<i64>()))
            .prop_map(|(name, counter, notes, last)| Domain { name, counter, notes, last });
    (agent_id(), domain, catalog(), prop::collection::vec(any::<prop::sample::Index>(), 0..8)).prop_map(
        |(id, domain, defs, picks)| {
            let mut state = AgentState::new(id, domain);
            for pick in picks {
                let def = &defs[pick.index(defs.len())];
                // Some mounts fail (missing requirements, invalid state); the state keeps whatever succeeded.
                let _ = mount(&mut state, &build_skill(def, false), &Value::Null, &Policy::default());
            }
            state
        },
    )
}

proptest! {
    /// The journal's params digest streams the JSON into the hash; it must equal the v5 UUID of the JSON text.
    #[test]
    fn params_digest_is_the_v5_uuid_of_the_json_text(params in json_value()) {
        let model = Uuid::new_v5(&Uuid::NAMESPACE_OID, params.to_string().as_bytes());
        prop_assert_eq!(agentry::store::params_digest(&params), model);
    }

    #[test]
    fn signals_round_trip(signal in signal()) {
        round_trip(&signal)?;
    }

    #[test]
    fn every_effect_round_trips(effect in effect()) {
        round_trip(&effect)?;
    }

    #[test]
    fn agent_states_round_trip(state in agent_state()) {
        round_trip(&state)?;
    }
}

#[test]
fn effects_serialize_as_flat_tagged_objects() {
    let effect = Effect::run(ActionId::new("arithmetic.add").unwrap(), json!({"a": 1, "b": 2}))
        .from_skill(SkillId::new("calculator").unwrap());
    assert_eq!(
        serde_json::to_value(&effect).unwrap(),
        json!({"effect": "run", "action": "arithmetic.add", "params": {"a": 1, "b": 2}, "meta": {"skill": "calculator"}})
    );
}

#[test]
fn a_tampered_state_is_refused_on_the_way_in() {
    let state = AgentState::new(AgentId::new("a").unwrap(), 1u8);
    let mut value = serde_json::to_value(&state).unwrap();
    value["id"] = json!("");
    assert!(
        serde_json::from_value::<AgentState<u8>>(value).unwrap_err().to_string().contains("agent id must not be empty")
    );
}
